package ledger

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Fencing (docs/design.md §3, "Fences"). A lock kept outside the log — swamp's
// locks, on a KV bucket with a TTL — can lapse while its holder is stopped
// (a suspended laptop), and another holder take it; the first, resumed,
// still believes it holds the lock. So the log itself is told who holds a
// lock, and refuses a commit made under a lock another holder has taken since:
//
//   - A holder that takes a lock (new, or over an expired one) stores a fence
//     record on the lock's fence subject, syncledger.<ledger>.p.~f<token>
//     (CommitLog.TakeFence). Its seq is the holder's Fence of the lock.
//   - A commit made under the lock carries the Fence (CommitLog.Append): its
//     atomic batch ends with one fence check per fence, on
//     syncledger.<ledger>.p.~c, which the log stores only while the lock's
//     fence subject's last seq is still the holder's fence. Another holder's
//     fence record since makes the whole batch refused, where it is written:
//     nothing is stored and the error is a *LockLostError (ErrLockLost).
//
// "~f" and "~c" are no EscapeToken output (an escape is "~" and two upper-case
// hex digits), so no partition key maps to these subjects. Fence records and
// fence checks are records no reader applies (Skip.Fence, Skip.Check): like a
// quarantine notice, each counts as processed, a commit of its own, and the
// HWM passes it. Fence subjects keep their last record through retention
// (TruncateBefore keeps every subject's last message).

// LogFormat is the newest log format this code reads and writes: a log's
// Info.Format (the stream's syncledger.format). Format 1 holds events and
// quarantine notices; format 2 (FenceFormat) fence records and checks too.
// A log keeps the format it was made with until an admin raises it, once
// every reader runs a release that reads the new one: a build refuses a log
// of a newer format (CheckLogFormat) rather than stop at a record it cannot
// read. A log of format 1 refuses fences (TakeFence, a fenced Append).
const (
	LogFormat   = 2
	FenceFormat = 2
)

// CheckLogFormat refuses a log format this build does not read.
func CheckLogFormat(f int) error {
	if f < 1 || f > LogFormat {
		return fmt.Errorf("log format %d (this build reads 1 to %d; upgrade syncledger): %w", f, LogFormat, ErrUnknownVersion)
	}
	return nil
}

// Fenced reports whether the log holds fences (its format is FenceFormat or
// later): only then do its locks' holders store fence records.
func (i Info) Fenced() bool { return i.Format >= FenceFormat }

// ErrNoFences: a fence asked of a log of a format before FenceFormat, which
// readers of older releases read: nothing was stored.
var ErrNoFences = fmt.Errorf("the log's format holds no fences (an admin raises it to %d once every reader runs a release that reads it): %w", FenceFormat, ErrInvalid)

// Fence subject tokens (see above).
const (
	FenceTokenPrefix = "~f"
	FenceCheckToken  = "~c"
)

// MaxLockLen bounds a lock's name, so that its fence subject (the name escaped,
// up to three bytes a byte) stays well inside a subject's limit.
const MaxLockLen = 512

// FenceSubject returns the subject of lock's fence records.
func FenceSubject(ledgerName, lock string) string {
	return SubjectPrefix(ledgerName) + FenceTokenPrefix + EscapeToken(lock)
}

// FenceCheckSubject returns the subject of a ledger's fence checks.
func FenceCheckSubject(ledgerName string) string {
	return SubjectPrefix(ledgerName) + FenceCheckToken
}

// LockOfFenceSubject returns the lock whose fence subject subject is; false if
// it is none.
func LockOfFenceSubject(ledgerName, subject string) (string, bool) {
	tok, ok := strings.CutPrefix(subject, SubjectPrefix(ledgerName)+FenceTokenPrefix)
	if !ok {
		return "", false
	}
	lock, err := UnescapeToken(tok)
	if err != nil || ValidateLock(lock) != nil {
		return "", false
	}
	return lock, true
}

// ReservedSubject reports whether subject is one of the ledger's subjects
// under its partition prefix that hold no events: its quarantine notices,
// its fence records and its fence checks. A reader that takes messages by
// their subject alone (a consumer) skips them as the log's readers do.
func ReservedSubject(ledgerName, subject string) bool {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix(ledgerName))
	return ok && (rest == QuarantineToken || rest == FenceCheckToken || strings.HasPrefix(rest, FenceTokenPrefix))
}

// ValidateLock checks a lock's name: 1 to MaxLockLen bytes of UTF-8.
func ValidateLock(lock string) error {
	if lock == "" || len(lock) > MaxLockLen || !utf8.ValidString(lock) {
		return fmt.Errorf("lock name %q: must be 1-%d bytes of UTF-8: %w", clip(lock), MaxLockLen, ErrInvalid)
	}
	return nil
}

// Fence is a fencing token: the seq of the fence record its holder stored
// when it took the lock (CommitLog.TakeFence). A commit carrying it is stored
// only while that record is still the lock's last.
type Fence struct {
	Lock string
	Seq  Seq
}

func (f Fence) String() string { return fmt.Sprintf("lock %q at seq %d", f.Lock, f.Seq) }

// FenceRecord is what a holder stores when it takes a lock.
type FenceRecord struct {
	V      int    `json:"v"`      // FormatVersion
	Ledger string `json:"ledger"` // the ledger's UUID
	Lock   string `json:"lock"`
	// ID identifies this taking of the lock (a UUID): the record's message
	// id, so that a retried TakeFence stores it once.
	ID     string    `json:"id"`
	Host   string    `json:"host"`             // the taker's host id
	Holder string    `json:"holder,omitempty"` // who, for people (swamp's "user@machine (pid N)")
	At     time.Time `json:"at"`
}

// String says who took the lock and when.
func (r FenceRecord) String() string {
	who := r.Holder
	if who == "" {
		who = "host " + r.Host
	} else if r.Host != "" {
		who += " on host " + r.Host
	}
	return fmt.Sprintf("%s at %s", who, r.At.UTC().Format(time.RFC3339))
}

// FenceCheck is the message a fenced commit adds to its atomic batch, one per
// fence: the log stores it only while Fence is Lock's last fence record.
type FenceCheck struct {
	V      int    `json:"v"`
	Ledger string `json:"ledger"`
	Commit string `json:"commit"` // the commit it fences
	Lock   string `json:"lock"`
	Fence  Seq    `json:"fence"`
}

// FenceCheckID is the message id of a commit's fence check i (0-based):
// "<commit>/f<i+1>", never an event's ("<commit>/<part>").
func FenceCheckID(commit string, i int) string { return fmt.Sprintf("%s/f%d", commit, i+1) }

// FenceRecordID is the message id of a fence record.
func FenceRecordID(rec FenceRecord) string { return rec.ID + "/fence" }

// EncodeFenceRecord returns the JSON form of a valid fence record.
func EncodeFenceRecord(r FenceRecord) ([]byte, error) {
	if err := validateFenceRecord(r); err != nil {
		return nil, fmt.Errorf("encode fence record: %w", err)
	}
	r.At = r.At.UTC()
	return json.Marshal(r)
}

// DecodeFenceRecord parses and checks a fence record (strictly: unknown
// fields refused).
func DecodeFenceRecord(b []byte) (FenceRecord, error) {
	var r FenceRecord
	if err := decodeStrict("fence record", b, &r); err != nil {
		return FenceRecord{}, err
	}
	if err := validateFenceRecord(r); err != nil {
		return FenceRecord{}, fmt.Errorf("decode fence record: %w", err)
	}
	return r, nil
}

func validateFenceRecord(r FenceRecord) error {
	switch {
	case r.V != FormatVersion:
		return fmt.Errorf("version %d (this build reads %d): %w", r.V, FormatVersion, ErrUnknownVersion)
	case !isUUID(r.Ledger):
		return fmt.Errorf("ledger %q is not a uuid: %w", clip(r.Ledger), ErrInvalid)
	case !isUUID(r.ID):
		return fmt.Errorf("id %q is not a uuid: %w", clip(r.ID), ErrInvalid)
	case r.Host == "" || len(r.Host) > MaxHostLen:
		return fmt.Errorf("host must be 1-%d bytes: %w", MaxHostLen, ErrInvalid)
	case len(r.Holder) > MaxHostLen:
		return fmt.Errorf("holder of %d bytes, limit %d: %w", len(r.Holder), MaxHostLen, ErrInvalid)
	case r.At.IsZero():
		return fmt.Errorf("no time: %w", ErrInvalid)
	}
	return ValidateLock(r.Lock)
}

// EncodeFenceCheck returns the JSON form of a valid fence check.
func EncodeFenceCheck(c FenceCheck) ([]byte, error) {
	if err := validateFenceCheck(c); err != nil {
		return nil, fmt.Errorf("encode fence check: %w", err)
	}
	return json.Marshal(c)
}

// DecodeFenceCheck parses and checks a fence check (strictly).
func DecodeFenceCheck(b []byte) (FenceCheck, error) {
	var c FenceCheck
	if err := decodeStrict("fence check", b, &c); err != nil {
		return FenceCheck{}, err
	}
	if err := validateFenceCheck(c); err != nil {
		return FenceCheck{}, fmt.Errorf("decode fence check: %w", err)
	}
	return c, nil
}

func validateFenceCheck(c FenceCheck) error {
	switch {
	case c.V != FormatVersion:
		return fmt.Errorf("version %d (this build reads %d): %w", c.V, FormatVersion, ErrUnknownVersion)
	case !isUUID(c.Ledger):
		return fmt.Errorf("ledger %q is not a uuid: %w", clip(c.Ledger), ErrInvalid)
	case !isUUID(c.Commit):
		return fmt.Errorf("commit %q is not a uuid: %w", clip(c.Commit), ErrInvalid)
	case c.Fence == 0:
		return fmt.Errorf("fence 0: %w", ErrInvalid)
	}
	return ValidateLock(c.Lock)
}

// decodeStrict reads one small document of the log (a fence record, a fence
// check) strictly: a bound, the version first, then unknown fields refused.
func decodeStrict(what string, b []byte, v any) error {
	if len(b) > MaxEventSize {
		return fmt.Errorf("decode %s: %d bytes: %w", what, len(b), ErrTooLarge)
	}
	if err := checkVersion(what, b); err != nil {
		return err
	}
	if err := strictDecode(b, v); err != nil {
		return fmt.Errorf("decode %s: %v: %w", what, err, ErrInvalid)
	}
	return nil
}

// FenceChecks returns the fence checks a commit carrying fences adds to its
// batch, after its events, in order: what every CommitLog stores for them.
func FenceChecks(uuid, commit string, fences []Fence) []FenceCheck {
	out := make([]FenceCheck, len(fences))
	for i, f := range fences {
		out[i] = FenceCheck{V: FormatVersion, Ledger: uuid, Commit: commit, Lock: f.Lock, Fence: f.Seq}
	}
	return out
}

// checkFences checks the fences of an append of k events: valid locks and
// seqs, no lock twice, and the batch within MaxBatch.
func checkFences(id string, k int, fences []Fence) error {
	if k+len(fences) > MaxBatch {
		return fmt.Errorf("append commit %s: %d events and %d fences, more than the %d messages one atomic batch may hold: %w", id, k, len(fences), MaxBatch, ErrTooLarge)
	}
	seen := make(map[string]bool, len(fences))
	for i, f := range fences {
		if err := ValidateLock(f.Lock); err != nil {
			return fmt.Errorf("append commit %s fence %d: %w", id, i+1, err)
		}
		if f.Seq == 0 {
			return fmt.Errorf("append commit %s fence %d (lock %q): seq 0: %w", id, i+1, f.Lock, ErrInvalid)
		}
		if seen[f.Lock] {
			return fmt.Errorf("append commit %s fence %d: lock %q twice: %w", id, i+1, f.Lock, ErrInvalid)
		}
		seen[f.Lock] = true
	}
	return nil
}

// LockLostError is returned (wrapped) by an Append carrying a fence that is no
// longer its lock's last fence record: another holder took the lock since.
// Nothing of the commit is stored. errors.Is(err, ErrLockLost) holds, and
// never errors.Is(err, ErrConflict), even when a partition's chain moved too:
// a commit under a lost lock is not retried.
type LockLostError struct {
	Lock  string
	Fence Seq // the fence the append carried
	Last  Seq // the lock's last fence record in the log
	// Taker is that record, when the log could read it (who took the lock).
	Taker *FenceRecord
}

func (e *LockLostError) Error() string {
	by := fmt.Sprintf("its last fence record is seq %d", e.Last)
	if e.Taker != nil {
		by = fmt.Sprintf("taken by %s (fence record seq %d)", e.Taker, e.Last)
	}
	return fmt.Sprintf("lock %q: %v: %s, this commit carried the fence of seq %d", e.Lock, ErrLockLost, by, e.Fence)
}

func (e *LockLostError) Unwrap() error { return ErrLockLost }

// FenceCheckSeqs returns the seqs of the fence checks of an append of events
// stored at seqs with n fences: the seqs after the last event's.
func FenceCheckSeqs(seqs []Seq, n int) []Seq {
	if len(seqs) == 0 || n == 0 {
		return nil
	}
	out := make([]Seq, n)
	for i := range out {
		out[i] = seqs[len(seqs)-1] + Seq(i+1)
	}
	return out
}
