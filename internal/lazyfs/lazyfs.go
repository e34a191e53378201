//go:build linux

package lazyfs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is the in-memory tree. Its methods are safe for concurrent use.
type FS struct {
	// MetadataJournal, set before Mount, makes any fsync also make every
	// name change so far durable (creations, renames, removals in every
	// directory), as a file system that journals its metadata does (ext4,
	// XFS, btrfs: an fsync commits the running journal transaction). File
	// content still needs the file's own fsync. The default is strict POSIX:
	// a name is durable only once its directory is fsynced.
	MetadataJournal bool

	mu   sync.Mutex
	root *node
	ino  uint64
	// Stats since New.
	fsyncs uint64
}

// node is a file or a directory, now and as of its last fsync.
type node struct {
	ino   uint64
	dir   bool
	mode  uint32 // permission bits
	mtime time.Time
	data  []byte           // file
	kids  map[string]*node // directory

	dmode  uint32
	dmtime time.Time
	ddata  []byte
	dkids  map[string]*node
}

// New returns an empty file system whose root directory is durable.
func New() *FS {
	f := &FS{}
	f.root = f.newNode(true, 0o755)
	return f
}

func (f *FS) newNode(dir bool, mode uint32) *node {
	f.ino++
	now := time.Now()
	n := &node{ino: f.ino, dir: dir, mode: mode & 0o7777, mtime: now, dmode: mode & 0o7777, dmtime: now}
	if dir {
		n.kids, n.dkids = map[string]*node{}, map[string]*node{}
	}
	return n
}

// sync makes n's present state durable (caller holds mu).
func (n *node) sync() {
	n.dmode, n.dmtime = n.mode, n.mtime
	if n.dir {
		n.dkids = maps.Clone(n.kids)
	} else {
		n.ddata = slices.Clone(n.data)
	}
}

// dirty reports whether n differs from its durable state.
func (n *node) dirty() bool {
	if n.mode != n.dmode || !n.mtime.Equal(n.dmtime) {
		return true
	}
	if n.dir {
		return !maps.Equal(n.kids, n.dkids)
	}
	return string(n.data) != string(n.ddata)
}

// DropStats says what a Drop lost.
type DropStats struct {
	Nodes int // files and directories whose unsynced changes were lost (reachable ones)
}

// Drop loses every change not fsynced: each file and directory reachable from
// the root through durable names becomes what it was at its last fsync, and
// everything else is gone. Unmount first (see the package doc).
func (f *FS) Drop() DropStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st DropStats
	var dirtyWalk func(n *node, seen map[*node]bool)
	dirtyWalk = func(n *node, seen map[*node]bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.dirty() {
			st.Nodes++
		}
		for _, k := range n.kids {
			dirtyWalk(k, seen)
		}
	}
	dirtyWalk(f.root, map[*node]bool{})
	seen := map[*node]bool{}
	var revert func(n *node) *node
	revert = func(n *node) *node {
		if seen[n] {
			// Named twice in durable directories (renamed, and the old name's
			// directory never synced since): a second, separate file.
			c := f.newNode(n.dir, n.dmode)
			c.ddata, c.dkids, c.dmtime = n.ddata, n.dkids, n.dmtime
			n = c
		}
		seen[n] = true
		n.mode, n.mtime = n.dmode, n.dmtime
		if !n.dir {
			n.data = slices.Clone(n.ddata)
			return n
		}
		n.kids = make(map[string]*node, len(n.dkids))
		for _, name := range slices.Sorted(maps.Keys(n.dkids)) {
			n.kids[name] = revert(n.dkids[name])
		}
		n.dkids = maps.Clone(n.kids)
		return n
	}
	f.root = revert(f.root)
	return st
}

// Fsyncs returns how many fsync calls the file system received.
func (f *FS) Fsyncs() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fsyncs
}

// Mount is a mounted FS.
type Mount struct {
	Dir string
	srv *fuse.Server
}

// Mount mounts f at dir (an existing empty directory). It needs root and
// /dev/fuse; an error says what failed.
func (f *FS) Mount(dir string) (*Mount, error) {
	f.mu.Lock()
	root := &fnode{fs: f, n: f.root}
	f.mu.Unlock()
	timeout := time.Second
	srv, err := fs.Mount(dir, root, &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			FsName:        "lazyfs",
			Name:          "lazyfs",
			DirectMount:   true,
			DisableXAttrs: true,
			MaxBackground: 64,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s (needs root and /dev/fuse): %w", dir, err)
	}
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, fmt.Errorf("lazyfs: mount %s: %w", dir, err)
	}
	return &Mount{Dir: dir, srv: srv}, nil
}

// Unmount unmounts and waits until the file system served its last request.
// Every process using it must have exited.
func (m *Mount) Unmount() error {
	var err error
	for range 50 {
		if err = m.srv.Unmount(); err == nil {
			m.srv.Wait()
			return nil
		}
		time.Sleep(100 * time.Millisecond) // busy: a killed process not yet reaped
	}
	// Still busy: detach it (lazy unmount) so no dead mount outlives the test.
	_ = syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	return fmt.Errorf("lazyfs: unmount %s (detached instead): %w", m.Dir, err)
}

// renameNoReplace is RENAME_NOREPLACE of renameat2(2).
const renameNoReplace = 1

// fnode is the go-fuse face of a node.
type fnode struct {
	fs.Inode
	fs *FS
	n  *node
}

var (
	_ fs.NodeLookuper       = (*fnode)(nil)
	_ fs.NodeReaddirer      = (*fnode)(nil)
	_ fs.NodeMkdirer        = (*fnode)(nil)
	_ fs.NodeCreater        = (*fnode)(nil)
	_ fs.NodeUnlinker       = (*fnode)(nil)
	_ fs.NodeRmdirer        = (*fnode)(nil)
	_ fs.NodeRenamer        = (*fnode)(nil)
	_ fs.NodeGetattrer      = (*fnode)(nil)
	_ fs.NodeSetattrer      = (*fnode)(nil)
	_ fs.NodeOpener         = (*fnode)(nil)
	_ fs.NodeReader         = (*fnode)(nil)
	_ fs.NodeWriter         = (*fnode)(nil)
	_ fs.NodeFsyncer        = (*fnode)(nil)
	_ fs.NodeFlusher        = (*fnode)(nil)
	_ fs.NodeStatfser       = (*fnode)(nil)
	_ fs.NodeAllocater      = (*fnode)(nil)
	_ fs.NodeOpendirer      = (*fnode)(nil)
	_ fs.NodeReleaser       = (*fnode)(nil)
	_ fs.NodeAccesser       = (*fnode)(nil)
	_ fs.NodeCopyFileRanger = (*fnode)(nil)
)

func (n *node) stable() fs.StableAttr {
	if n.dir {
		return fs.StableAttr{Mode: syscall.S_IFDIR, Ino: n.ino}
	}
	return fs.StableAttr{Mode: syscall.S_IFREG, Ino: n.ino}
}

func (n *node) attr(out *fuse.Attr) {
	out.Ino = n.ino
	if n.dir {
		out.Mode = syscall.S_IFDIR | n.mode
		out.Nlink = 2
		out.Size = 4096
	} else {
		out.Mode = syscall.S_IFREG | n.mode
		out.Nlink = 1
		out.Size = uint64(len(n.data))
	}
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = 4096
	out.SetTimes(nil, &n.mtime, &n.mtime)
}

func (d *fnode) child(ctx context.Context, c *node, out *fuse.EntryOut) *fs.Inode {
	c.attr(&out.Attr)
	return d.NewInode(ctx, &fnode{fs: d.fs, n: c}, c.stable())
}

func (d *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	c, ok := d.n.kids[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return d.child(ctx, c, out), 0
}

func (d *fnode) Opendir(ctx context.Context) syscall.Errno { return 0 }

func (d *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	var ents []fuse.DirEntry
	for _, name := range slices.Sorted(maps.Keys(d.n.kids)) {
		c := d.n.kids[name]
		ents = append(ents, fuse.DirEntry{Name: name, Ino: c.ino, Mode: c.stable().Mode})
	}
	return fs.NewListDirStream(ents), 0
}

func (d *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if _, ok := d.n.kids[name]; ok {
		return nil, syscall.EEXIST
	}
	c := d.fs.newNode(true, mode)
	d.n.kids[name] = c
	d.n.mtime = time.Now()
	return d.child(ctx, c, out), 0
}

func (d *fnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	c, ok := d.n.kids[name]
	switch {
	case ok && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case ok && c.dir:
		return nil, nil, 0, syscall.EISDIR
	case ok:
		if flags&syscall.O_TRUNC != 0 {
			c.data, c.mtime = nil, time.Now()
		}
	default:
		c = d.fs.newNode(false, mode)
		d.n.kids[name] = c
		d.n.mtime = time.Now()
	}
	return d.child(ctx, c, out), nil, 0, 0
}

func (d *fnode) Unlink(ctx context.Context, name string) syscall.Errno { return d.remove(name, false) }

func (d *fnode) Rmdir(ctx context.Context, name string) syscall.Errno { return d.remove(name, true) }

// remove unlinks a file (dir false) or removes an empty directory.
func (d *fnode) remove(name string, dir bool) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	c, ok := d.n.kids[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case c.dir && !dir:
		return syscall.EISDIR
	case !c.dir && dir:
		return syscall.ENOTDIR
	case c.dir && len(c.kids) > 0:
		return syscall.ENOTEMPTY
	}
	delete(d.n.kids, name)
	d.n.mtime = time.Now()
	return 0
}

func (d *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*fnode)
	if !ok {
		return syscall.EXDEV
	}
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	c, ok := d.n.kids[name]
	if !ok {
		return syscall.ENOENT
	}
	if flags&^uint32(renameNoReplace) != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE, RENAME_WHITEOUT: not needed
	}
	if old, ok := to.n.kids[newName]; ok {
		switch {
		case old == c:
			return 0
		case flags&renameNoReplace != 0:
			return syscall.EEXIST
		case old.dir && !c.dir:
			return syscall.EISDIR
		case !old.dir && c.dir:
			return syscall.ENOTDIR
		case old.dir && len(old.kids) > 0:
			return syscall.ENOTEMPTY
		}
	}
	if c.dir { // not into itself
		for p := to.n; ; {
			if p == c {
				return syscall.EINVAL
			}
			parent := d.fs.parentOf(p)
			if parent == nil {
				break
			}
			p = parent
		}
	}
	delete(d.n.kids, name)
	to.n.kids[newName] = c
	now := time.Now()
	d.n.mtime, to.n.mtime = now, now
	return 0
}

// parentOf finds n's directory (caller holds mu; only for the rename check).
func (f *FS) parentOf(n *node) *node {
	var find func(d *node) *node
	find = func(d *node) *node {
		for _, k := range d.kids {
			if k == n {
				return d
			}
			if k.dir {
				if p := find(k); p != nil {
					return p
				}
			}
		}
		return nil
	}
	return find(f.root)
}

func (d *fnode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	d.n.attr(&out.Attr)
	return 0
}

func (d *fnode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	n := d.n
	if sz, ok := in.GetSize(); ok {
		if n.dir {
			return syscall.EISDIR
		}
		n.data = resize(n.data, int(sz))
		n.mtime = time.Now()
	}
	if m, ok := in.GetMode(); ok {
		n.mode = m & 0o7777
	}
	if mt, ok := in.GetMTime(); ok {
		n.mtime = mt
	}
	n.attr(&out.Attr)
	return 0
}

func resize(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n]
	}
	return append(b, make([]byte, n-len(b))...)
}

func (d *fnode) Access(ctx context.Context, mask uint32) syscall.Errno { return 0 }

func (d *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if d.n.dir {
		return nil, 0, syscall.EISDIR
	}
	if flags&syscall.O_TRUNC != 0 {
		d.n.data, d.n.mtime = nil, time.Now()
	}
	return nil, 0, 0
}

func (d *fnode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	data := d.n.data
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	n := copy(dest, data[off:])
	return fuse.ReadResultData(dest[:n]), 0
}

func (d *fnode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	n := d.n
	if end := int(off) + len(data); end > len(n.data) {
		n.data = resize(n.data, end)
	}
	copy(n.data[off:], data)
	n.mtime = time.Now()
	return uint32(len(data)), 0
}

func (d *fnode) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	const keepSize = 0x01 // FALLOC_FL_KEEP_SIZE
	if end := int(off + size); mode&keepSize == 0 && end > len(d.n.data) {
		d.n.data = resize(d.n.data, end)
	}
	return 0
}

func (d *fnode) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS // the kernel falls back to read and write
}

// Fsync makes the node durable: a file's content and attributes, a
// directory's names.
func (d *fnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	d.fs.fsyncs++
	d.n.sync()
	if d.fs.MetadataJournal {
		var names func(n *node)
		names = func(n *node) {
			if !n.dir {
				return
			}
			n.dkids = maps.Clone(n.kids)
			for _, k := range n.kids {
				names(k)
			}
		}
		names(d.fs.root)
	}
	return 0
}

func (d *fnode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno   { return 0 }
func (d *fnode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (d *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize, out.NameLen = 4096, 4096, 255
	out.Blocks, out.Bfree, out.Bavail = 1<<24, 1<<23, 1<<23
	out.Files, out.Ffree = 1<<20, 1<<19
	return 0
}
