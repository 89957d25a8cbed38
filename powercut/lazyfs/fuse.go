package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ErrUnavailable is returned by Mount where FUSE cannot be used: no
// /dev/fuse, or no permission to mount. Tests skip on it (loudly); any
// other mount error is a failure.
var ErrUnavailable = errors.New("FUSE unavailable")

// fsNode serves one node of a Disk through go-fuse. Every operation goes
// to the model; go-fuse's own inode tree only caches what the kernel has
// looked up.
type fsNode struct {
	fs.Inode
	d *Disk
	n *node
}

var (
	_ fs.NodeLookuper   = (*fsNode)(nil)
	_ fs.NodeReaddirer  = (*fsNode)(nil)
	_ fs.NodeGetattrer  = (*fsNode)(nil)
	_ fs.NodeSetattrer  = (*fsNode)(nil)
	_ fs.NodeOpener     = (*fsNode)(nil)
	_ fs.NodeCreater    = (*fsNode)(nil)
	_ fs.NodeMkdirer    = (*fsNode)(nil)
	_ fs.NodeUnlinker   = (*fsNode)(nil)
	_ fs.NodeRmdirer    = (*fsNode)(nil)
	_ fs.NodeRenamer    = (*fsNode)(nil)
	_ fs.NodeReader     = (*fsNode)(nil)
	_ fs.NodeWriter     = (*fsNode)(nil)
	_ fs.NodeFsyncer    = (*fsNode)(nil)
	_ fs.NodeFlusher    = (*fsNode)(nil)
	_ fs.NodeAllocater  = (*fsNode)(nil)
	_ fs.NodeStatfser   = (*fsNode)(nil)
	_ fs.NodeOpendirer  = (*fsNode)(nil)
	_ fs.NodeReleaser   = (*fsNode)(nil)
	_ fs.NodeGetxattrer = (*fsNode)(nil)
)

func mode(n *node) uint32 {
	if n.dir {
		return syscall.S_IFDIR | 0o755
	}
	return syscall.S_IFREG | 0o644
}

func (f *fsNode) fill(n *node, a *fuse.Attr) {
	a.Ino = n.ino
	a.Mode = mode(n)
	a.Nlink = 1
	a.Blksize = PageSize
	if n.dir {
		a.Nlink = 2
		return
	}
	size, mtime := f.d.attr(n)
	a.Size = uint64(size)
	a.Blocks = (a.Size + 511) / 512
	t := time.Unix(0, mtime)
	a.SetTimes(&t, &t, &t)
}

func (f *fsNode) child(ctx context.Context, n *node, out *fuse.EntryOut) *fs.Inode {
	f.fill(n, &out.Attr)
	return f.NewInode(ctx, &fsNode{d: f.d, n: n}, fs.StableAttr{Mode: mode(n) &^ 0o7777, Ino: n.ino})
}

func (f *fsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n := f.d.lookup(f.n, name)
	if n == nil {
		return nil, syscall.ENOENT
	}
	return f.child(ctx, n, out), 0
}

func (f *fsNode) Opendir(context.Context) syscall.Errno { return 0 }

func (f *fsNode) Readdir(context.Context) (fs.DirStream, syscall.Errno) {
	var list []fuse.DirEntry
	for _, name := range f.d.names(f.n) {
		if c := f.d.lookup(f.n, name); c != nil {
			list = append(list, fuse.DirEntry{Name: name, Mode: mode(c), Ino: c.ino})
		}
	}
	return fs.NewListDirStream(list), 0
}

func (f *fsNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fill(f.n, &out.Attr)
	return 0
}

func (f *fsNode) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENODATA
}

func (f *fsNode) Setattr(_ context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if f.n.dir {
			return syscall.EISDIR
		}
		f.d.truncate(f.n, int64(size), time.Now().UnixNano())
	}
	f.fill(f.n, &out.Attr)
	return 0
}

func (f *fsNode) Open(_ context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 && !f.n.dir {
		f.d.truncate(f.n, 0, time.Now().UnixNano())
	}
	return nil, 0, 0
}

func (f *fsNode) Release(context.Context, fs.FileHandle) syscall.Errno { return 0 }

func (f *fsNode) Flush(context.Context, fs.FileHandle) syscall.Errno { return 0 }

func (f *fsNode) Create(ctx context.Context, name string, flags, _ uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n, errno := f.d.create(f.n, name, false, flags&syscall.O_EXCL != 0)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		f.d.truncate(n, 0, time.Now().UnixNano())
	}
	return f.child(ctx, n, out), nil, 0, 0
}

func (f *fsNode) Mkdir(ctx context.Context, name string, _ uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n, errno := f.d.create(f.n, name, true, true)
	if errno != 0 {
		return nil, errno
	}
	return f.child(ctx, n, out), 0
}

func (f *fsNode) Unlink(_ context.Context, name string) syscall.Errno {
	return f.d.unlink(f.n, name, false)
}

func (f *fsNode) Rmdir(_ context.Context, name string) syscall.Errno {
	return f.d.unlink(f.n, name, true)
}

func (f *fsNode) Rename(_ context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*fsNode)
	if !ok {
		return syscall.EXDEV
	}
	switch flags {
	case 0:
	case renameNoReplace:
		if f.d.lookup(to.n, newName) != nil {
			return syscall.EEXIST
		}
	default:
		return syscall.EINVAL
	}
	return f.d.rename(f.n, name, to.n, newName)
}

func (f *fsNode) Read(_ context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n := f.d.read(f.n, dest, off)
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *fsNode) Write(_ context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.d.write(f.n, data, off, time.Now().UnixNano())
	return uint32(len(data)), 0
}

// Fsync serves fsync, fdatasync and msync(MS_SYNC) of a file (the kernel
// writes the dirty mapped pages back first, then asks) and fsync of a
// directory. FUSE does not pass msync's range, so an msync makes the whole
// file durable: the model is stricter than a disk only in syncing more.
func (f *fsNode) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno {
	f.d.sync(f.n)
	return 0
}

func (f *fsNode) Allocate(_ context.Context, _ fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return f.d.allocate(f.n, int64(off), int64(size), mode)
}

func (f *fsNode) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	const blocks = 64 << 30 / PageSize
	out.Bsize, out.Frsize = PageSize, PageSize
	out.Blocks, out.Bfree, out.Bavail = blocks, blocks, blocks
	out.Files, out.Ffree = 1<<20, 1<<20
	out.NameLen = 255
	return 0
}

// renameNoReplace is RENAME_NOREPLACE from linux/fs.h.
const renameNoReplace = 0x1

// Mount is a Disk served at a directory.
type Mount struct {
	Dir string
	srv *fuse.Server
}

// Mount serves the disk at dir, which must exist. Only one mount of a disk
// may exist at a time. Where FUSE is unavailable the error wraps
// ErrUnavailable.
func (d *Disk) Mount(dir string) (*Mount, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("cannot mount lazy filesystem at %s: %w: %v", dir, ErrUnavailable, err)
	}
	zero := time.Duration(0)
	root := &fsNode{d: d, n: d.root}
	srv, err := fs.Mount(dir, root, &fs.Options{
		// The kernel asks again for every name and size: the disk is the
		// only truth, and a cut replaces it wholesale.
		EntryTimeout: &zero,
		AttrTimeout:  &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            "powercut",
			Name:              "powercut",
			MaxWrite:          1 << 20,
			DisableXAttrs:     true,
		},
	})
	if err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENODEV) {
			return nil, fmt.Errorf("cannot mount lazy filesystem at %s: %w: %v", dir, ErrUnavailable, err)
		}
		return nil, fmt.Errorf("cannot mount lazy filesystem at %s: %w", dir, err)
	}
	return &Mount{Dir: dir, srv: srv}, nil
}

// Unmount detaches the filesystem, retrying while the kernel still counts
// files of a killed process as open. The kernel writes dirty mapped pages
// back before it lets go, so after Unmount the disk holds everything a
// process crash would have kept.
func (m *Mount) Unmount() error {
	var err error
	for i := 0; i < 100; i++ {
		if err = m.srv.Unmount(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("cannot unmount %s: %w", m.Dir, err)
}
