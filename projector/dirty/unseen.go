//go:build linux

package dirty

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
)

// What inotify cannot report (issue 26 point 8). A watch on a directory hears
// of changes made through the names in it; it hears nothing of
//
//   - a change made through another name of the same file: a hard link
//     outside the cache, or in another directory of it. So the files with
//     more than one link are listed in every snapshot, always checked. They
//     are found when the set becomes trusted (findLinked: Snapshot waits for
//     that search) and by the events that make a name (a link made in the
//     cache, a file moved in); one found by an event makes the set untrusted,
//     since its other names in the cache are not known until the next full
//     scan;
//   - anything under a mount point inside the cache (another file system, a
//     bind mount, one mounted after the watch was added): each mount point
//     under the root is listed in every snapshot (mountsUnder), its subtree
//     checked whole.
//
// What no watch can see stays: a link made from outside the cache to a file
// that had one link when the set was last trusted (link(2) reports only to
// watches of the file itself), until the next full scan.

// findLinked lists the files under the root with more than one link and,
// unless the set lost trust since seq (the snapshot the full scan's ack
// followed), makes it trusted with them; it closes done.
func (w *Watcher) findLinked(seq uint64, done chan struct{}) {
	found := map[string]bool{}
	_ = filepath.WalkDir(w.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone, or not readable: the commit's scan says so
		}
		rel, _ := filepath.Rel(w.root, p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if excluded(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if multiLinked(e) {
			found[rel] = true
		}
		return nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lostAt < seq && w.broken == "" && !w.closed {
		w.linked = found
		w.trusted, w.reason = true, ""
	}
	w.linking = nil
	close(done)
}

// waitLinked waits, w.mu held (and released meanwhile), until the search for
// linked files that trust waits on is done.
func (w *Watcher) waitLinked(ctx context.Context) error {
	done := w.linking
	w.mu.Unlock()
	defer w.mu.Lock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkLinks looks at a name an event made (w.mu held): a file with more than
// one link is listed from now on, and the set loses trust (its other names in
// the cache are not known).
func (w *Watcher) checkLinks(rel string) {
	if w.linked[rel] {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(w.root, filepath.FromSlash(rel)), &st); err != nil || st.Mode&syscall.S_IFMT == syscall.S_IFDIR || st.Nlink < 2 {
		return
	}
	if w.linked == nil {
		w.linked = map[string]bool{}
	}
	w.linked[rel] = true
	w.lose(rel + " has more than one link: another name of it can change it unseen")
}

// multiLinked reports whether the file e names has more than one link.
func multiLinked(e fs.DirEntry) bool {
	fi, err := e.Info()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink > 1
}

// mountsUnder returns the mount points below the root, relative to it.
func (w *Watcher) mountsUnder() []string {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(w.root))
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range mounts {
		if rel, ok := strings.CutPrefix(m.Mountpoint, w.root+"/"); ok && !excluded(strings.SplitN(rel, "/", 2)[0]) {
			out = append(out, rel)
		}
	}
	return out
}
