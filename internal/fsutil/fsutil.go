// Package fsutil holds the few file operations that idemlog's metadata
// files (checkpoints, snapshots, the producer-id watermark, the
// clean-shutdown marker) share, so that each is written one way.
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// WriteFileAtomic replaces path with data: it writes a temporary file
// beside it, syncs it and renames it over path, so a crash leaves either
// the old content or the new, never a torn file. The rename itself is
// durable only after SyncDir of the directory; callers that write several
// files sync the directory once.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// WriteFileNoSync writes data to path as WriteFileAtomic does (a temporary
// file renamed over path, so a reader never sees half of it) but syncs
// nothing: for a file that must survive a process crash at once and a
// machine crash only once the caller has synced it (SyncFile, SyncDir).
// After a machine crash the file may be empty or hold garbage: its reader
// must check it.
func WriteFileNoSync(path string, data []byte) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, data, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// SyncFile makes path's contents durable; a missing file is no error.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", path, err)
	}
	return nil
}

// SyncDir makes the directory's entries (creations, renames, removals)
// durable.
func SyncDir(dir string) error {
	if fn := dirSyncObserver.Load(); fn != nil {
		(*fn)(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync dir %s: %w", dir, err)
	}
	return nil
}

// Exists reports whether path exists (any error but "not exist" counts as
// existing, so a caller never takes an unreadable file for a missing one).
func Exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// ErrFileTooLarge: ReadFileMax found a file longer than its bound.
var ErrFileTooLarge = errors.New("file larger than its format allows")

// ReadFileMax reads a small metadata file whole, refusing (ErrFileTooLarge)
// one longer than max before reading it: such a file cannot be what was
// written, and reading it whole could cost any amount of memory.
//
// It reads with plain system calls (open, read to the end, close), not
// an os.File, whose open also registers the descriptor with the poller
// and stats it: an Open of thousands of partitions reads several such
// files for each.
func ReadFileMax(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	// One byte more than max tells a file that is too long.
	buf := make([]byte, min(max+1, 512))
	n := 0
	for {
		if n == len(buf) {
			if int64(n) > max {
				return nil, fmt.Errorf("cannot read %s: more than %d bytes: %w", path, max, ErrFileTooLarge)
			}
			buf = append(buf, make([]byte, min(int64(len(buf)), max+1-int64(len(buf))))...)
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// MkdirAllDurable is os.MkdirAll whose result survives a machine crash:
// each directory it creates is synced into its parent before the next one
// is made in it, and the parent of dir is synced even when dir existed, so
// that a directory an earlier call made and a crash kept from being synced
// is made durable before anything in it is trusted. A directory's own new
// entries are its creator's to sync (SyncDir) once they are written.
func MkdirAllDurable(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot create dir %s: %w", dir, err)
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cannot create dir %s: %w", dir, err)
		}
		if err := SyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("cannot create dir %s: %w", dir, err)
		}
	}
	if len(missing) == 0 {
		if err := SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("cannot create dir %s: %w", dir, err)
		}
	}
	return nil
}

// dirSyncObserver, if set, sees every directory SyncDir syncs.
var dirSyncObserver atomic.Pointer[func(dir string)]

// ObserveDirSyncs has fn called with the directory of every SyncDir until
// the returned stop is called: for tests that check that a directory entry
// is made durable. One observer at a time, process-wide.
func ObserveDirSyncs(fn func(dir string)) (stop func()) {
	dirSyncObserver.Store(&fn)
	return func() { dirSyncObserver.Store(nil) }
}
