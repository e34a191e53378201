// Package audit is the audit consumer: a consumers.Handler that appends one JSON
// line per commit (a consumers.Summary: commit id, seq, host, time, partitions,
// paths and sizes) to a file with size-based rotation, or to a stream such as
// stdout.
//
// # Exactly once in the file
//
// Commits arrive in seq order, at least once (see package consumers). The Writer
// buffers lines and writes them in Flush, before the Runner acknowledges them;
// on open it reads the file's last complete line to learn the last seq written
// (from the newest rotated file when the current one is empty), drops a trailing
// partial line a crash left behind, and from then on skips every commit whose
// seq is not above it. So after any crash and restart the file holds every
// commit once, in seq order. With Config.Sync each Flush is fsynced (and the
// directory when the file is created or rotated) before the Runner
// acknowledges the commits, so this holds across power loss too (tested on a
// file system that drops what was not fsynced: TestPowerLoss in
// cmd/syncledger); without it, across process crashes.
//
// A writer to a stream (Config.Out) has nothing to read back: it skips
// duplicates within one run only.
//
// # Rotation
//
// Before a Flush would take the file past Config.MaxSize, the file is renamed
// to <path>.<seq of its last line> and a new one is started; Config.MaxFiles
// bounds how many rotated files are kept. A lock file <path>.lock keeps a second
// process from writing the same file.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
)

// DefaultMaxSize is the rotation size when Config.MaxSize is 0.
const DefaultMaxSize = 100 << 20

// ErrInUse: another process holds the audit file's lock.
var ErrInUse = errors.New("audit file in use")

// Config configures a Writer.
type Config struct {
	Ledger string // ledger name, written in each line
	// Path is the audit file. Empty means Out.
	Path string
	// Out receives the lines when Path is empty (stdout, say).
	Out io.Writer
	// MaxSize rotates the file before it would exceed this many bytes; 0 means
	// DefaultMaxSize, negative never rotates.
	MaxSize int64
	// MaxFiles is how many rotated files are kept; 0 keeps all.
	MaxFiles int
	// Sync fsyncs the file at each Flush (and the directory at each rotation).
	Sync bool
	// Blobs, when set, is read for the entries of commits kept in manifests;
	// without it their manifests are listed as unresolved.
	Blobs *ledger.Bucket
	// Log, when set, is read to check that each commit given follows the last
	// one written without a gap (see GapError). Partitions are the partitions
	// the consumer filters on (none: all): events of others are no gap.
	Log        ledger.CommitLog
	Partitions []string
	// AcceptGapTo lets a gap whose next commit is at or below this seq be
	// recorded past (logged by the caller): the operator's decision to leave
	// its commits out of the file (ones dead-lettered in an earlier run, say).
	AcceptGapTo ledger.Seq
}

// GapError: the audit consumer was given a commit after seqs of the ledger it
// was not given — its durable consumer was moved forward (a reset to a later
// seq) or its filter widened away — or the seqs between could not be read.
// Writing the commit would leave those commits out of the file for good, so
// the Writer refuses (wrapped in consumers.Stop: the Runner stops) until the
// consumer is started again at Last+1.
type GapError struct {
	Last   ledger.Seq   // the last seq written
	Next   ledger.Seq   // the first seq of the commit given
	Missed []ledger.Seq // seqs in between that hold events this consumer wants (at most 10)
	Err    error        // the gap could not be read (the log no longer holds it, a bad message)
}

func (e *GapError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("audit: given seq %d after seq %d, and the seqs between cannot be checked: %v", e.Next, e.Last, e.Err)
	}
	return fmt.Sprintf("audit: given seq %d after seq %d, but seqs %v between hold commits it was not given (its consumer was moved): refusing to record past the gap", e.Next, e.Last, e.Missed)
}

func (e *GapError) Unwrap() error { return e.Err }

// Writer is the audit handler. It is used by one Runner at a time.
type Writer struct {
	cfg     Config
	f       *os.File
	lock    *os.File
	size    int64
	buf     bytes.Buffer
	last    ledger.Seq // last seq buffered or written
	flushed ledger.Seq // last seq written
	given   ledger.Seq // last seq of a commit Handle took past the gap check (it may have failed since)
}

var (
	_ consumers.Handler = (*Writer)(nil)
	_ consumers.Flusher = (*Writer)(nil)
)

// Open opens (creating) the audit file, or a writer to cfg.Out.
func Open(cfg Config) (*Writer, error) {
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.MaxFiles < 0 {
		return nil, fmt.Errorf("open audit: negative max files: %w", ledger.ErrInvalid)
	}
	w := &Writer{cfg: cfg}
	if cfg.Path == "" {
		if cfg.Out == nil {
			return nil, fmt.Errorf("open audit: no path and no writer: %w", ledger.ErrInvalid)
		}
		return w, nil
	}
	lock, err := lockFile(cfg.Path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("open audit %s: %w", cfg.Path, err)
	}
	w.lock = lock
	if err := w.open(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// open opens the current file, repairs its tail and finds the last seq written.
func (w *Writer) open() error {
	_, serr := os.Lstat(w.cfg.Path)
	f, err := os.OpenFile(w.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open audit: %w", err)
	}
	w.f = f
	if errors.Is(serr, fs.ErrNotExist) && w.cfg.Sync {
		// The file's name must be durable before any line in it counts as
		// written (and its commit is acknowledged): fsync the directory.
		if err := fsx.SyncDir(filepath.Dir(w.cfg.Path)); err != nil {
			return fmt.Errorf("open audit %s: %w", w.cfg.Path, err)
		}
	}
	size, last, err := lastLine(f)
	if err != nil {
		return fmt.Errorf("open audit %s: %w", w.cfg.Path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open audit: %w", err)
	}
	if size < fi.Size() { // a partial line from a crash mid-write
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("open audit %s: drop partial last line: %w", w.cfg.Path, err)
		}
	}
	w.size = size
	if last == nil {
		rotated, err := w.rotated()
		if err != nil {
			return err
		}
		if n := len(rotated); n > 0 {
			w.last = rotated[n-1]
		}
	} else {
		var line struct {
			Seq *ledger.Seq `json:"seq"`
		}
		if err := json.Unmarshal(last, &line); err != nil || line.Seq == nil {
			return fmt.Errorf("open audit %s: last line is not an audit record (%.80q): %w", w.cfg.Path, last, ledger.ErrInvalid)
		}
		w.last = *line.Seq
	}
	w.flushed = w.last
	return nil
}

// lastLine returns the length of f up to and including its last newline, and
// the last line before it (nil if f has no complete line).
func lastLine(f *os.File) (int64, []byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	nl, err := lastNewline(f, fi.Size())
	if err != nil || nl < 0 {
		return 0, nil, err
	}
	prev, err := lastNewline(f, nl)
	if err != nil {
		return 0, nil, err
	}
	line := make([]byte, nl-prev-1)
	if _, err := f.ReadAt(line, prev+1); err != nil {
		return 0, nil, err
	}
	return nl + 1, line, nil
}

// lastNewline returns the offset of the last '\n' in f before end, or -1.
func lastNewline(f *os.File, end int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end > 0 {
		n := min(int64(len(buf)), end)
		b := buf[:n]
		if _, err := f.ReadAt(b, end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return end - n + int64(i), nil
		}
		end -= n
	}
	return -1, nil
}

// rotated returns the last seqs of the rotated files, ascending.
func (w *Writer) rotated() ([]ledger.Seq, error) {
	matches, err := filepath.Glob(escapeGlob(w.cfg.Path) + ".*")
	if err != nil {
		return nil, fmt.Errorf("list rotated audit files: %w", err)
	}
	var out []ledger.Seq
	for _, m := range matches {
		n, err := strconv.ParseUint(strings.TrimPrefix(m, w.cfg.Path+"."), 10, 64)
		if err == nil {
			out = append(out, ledger.Seq(n))
		}
	}
	slices.Sort(out)
	return out, nil
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// LastSeq returns the seq of the last commit written (or buffered).
func (w *Writer) LastSeq() ledger.Seq { return w.last }

// Handle buffers c's line, unless c is at or below the last seq written.
func (w *Writer) Handle(ctx context.Context, c consumers.Commit) error {
	if c.Seq <= w.last {
		return nil
	}
	if err := w.checkGap(ctx, c); err != nil {
		return consumers.Stop(err)
	}
	w.given = max(w.given, c.Seq)
	s, err := consumers.Summarize(ctx, w.cfg.Ledger, c, w.cfg.Blobs)
	if err != nil {
		return err
	}
	line, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("audit commit %s: %w", c.ID, err)
	}
	w.buf.Write(line)
	w.buf.WriteByte('\n')
	w.last = c.Seq
	return nil
}

// checkGap returns a *GapError when the log holds, between the last seq
// written and c, an event of the consumer's partitions that is part of a
// commit after the last one written. Quarantined seqs and notices are no gap;
// nor is anything before the first line of an empty file, a commit given to
// this Writer before (it failed, and the Runner dead-lettered it), or a gap
// the Config accepts.
func (w *Writer) checkGap(ctx context.Context, c consumers.Commit) error {
	last := max(w.last, w.given)
	from, to := last+1, c.Records[0].Seq-1
	if w.cfg.Log == nil || w.last == 0 || to < from || to < w.cfg.AcceptGapTo {
		return nil
	}
	g := &GapError{Last: last, Next: to + 1}
	err := w.cfg.Log.Read(ctx, from, to, func(r ledger.Record) error {
		if r.Skip == nil && r.CommitSeq() > last && (len(w.cfg.Partitions) == 0 || slices.Contains(w.cfg.Partitions, r.Event.Partition)) {
			if g.Missed = append(g.Missed, r.Seq); len(g.Missed) == 10 {
				return errGapFull
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errGapFull) {
		if ctx.Err() != nil {
			return err
		}
		g.Err = err
		return g
	}
	if len(g.Missed) > 0 {
		return g
	}
	return nil
}

var errGapFull = errors.New("enough missed seqs")

// Flush writes the buffered lines in one write (rotating first if they would
// take the file past MaxSize) and, with Sync, fsyncs. On error nothing buffered
// counts as written: the lines are dropped, the file cut back, and the commits
// are written again when they are delivered again.
func (w *Writer) Flush(context.Context) error {
	if w.buf.Len() == 0 {
		return nil
	}
	err := w.write()
	w.buf.Reset()
	if err != nil {
		w.last = w.flushed
		return err
	}
	w.flushed = w.last
	return nil
}

func (w *Writer) write() error {
	if w.f == nil {
		_, err := w.cfg.Out.Write(w.buf.Bytes())
		if err != nil {
			return fmt.Errorf("write audit: %w", err)
		}
		return nil
	}
	if w.cfg.MaxSize > 0 && w.size > 0 && w.size+int64(w.buf.Len()) > w.cfg.MaxSize {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.f.Write(w.buf.Bytes())
	if err == nil && w.cfg.Sync {
		err = w.f.Sync()
	}
	if err != nil {
		if n > 0 {
			_ = w.f.Truncate(w.size)
		}
		return fmt.Errorf("write audit %s: %w", w.cfg.Path, err)
	}
	w.size += int64(n)
	return nil
}

// rotate renames the current file after its last seq and starts a new one.
func (w *Writer) rotate() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("rotate audit %s: %w", w.cfg.Path, err)
	}
	w.f = nil
	to := w.cfg.Path + "." + strconv.FormatUint(uint64(w.flushed), 10)
	if err := os.Rename(w.cfg.Path, to); err != nil {
		return fmt.Errorf("rotate audit %s: %w", w.cfg.Path, err)
	}
	f, err := os.OpenFile(w.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("rotate audit %s: %w", w.cfg.Path, err)
	}
	w.f, w.size = f, 0
	if w.cfg.Sync {
		if err := fsx.SyncDir(filepath.Dir(w.cfg.Path)); err != nil {
			return fmt.Errorf("rotate audit %s: %w", w.cfg.Path, err)
		}
	}
	if w.cfg.MaxFiles > 0 {
		seqs, err := w.rotated()
		if err != nil {
			return err
		}
		for len(seqs) > w.cfg.MaxFiles {
			_ = os.Remove(w.cfg.Path + "." + strconv.FormatUint(uint64(seqs[0]), 10))
			seqs = seqs[1:]
		}
	}
	return nil
}

// Close closes the file and releases its lock; it does not flush.
func (w *Writer) Close() error {
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	if w.lock != nil {
		w.lock.Close() // releases the flock
		w.lock = nil
	}
	return err
}
