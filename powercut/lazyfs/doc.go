// Package lazyfs is a filesystem that forgets what was not synced when the
// power is cut, for testing what a program promises about durability.
//
// A Disk is kept in memory and served through FUSE (go-fuse), so the
// program under test runs unchanged on a real mount: pwrite and pwritev,
// shared writable mappings (the kernel writes their dirty pages back as
// FUSE writes on msync, fsync, munmap or whenever it likes), madvise,
// fallocate, ftruncate, rename, unlink, mkdir, directory fsync and flock
// (handled by the kernel itself). Per file the disk keeps the content and
// size now and as of the last fsync or fdatasync of the file; per
// directory the entries now and as of the last fsync of the directory.
// Disk.Cut is the power cut: every file and directory reverts to its
// durable image, and what is no longer reachable from the root is gone.
// A torn cut keeps some of the unsynced page writes as well: a prefix in
// the order they were made, or a random subset, as a disk that wrote its
// cache back partly, in order or not.
//
// The model follows LazyFS and the studies of crash consistency (ALICE,
// dm-log-writes): the strictest reading of POSIX, where only fsync makes
// anything durable and a name needs a sync of its directory. Two choices
// are deliberate. Directory operations are never torn (journaling
// filesystems commit each one whole). An msync reaches FUSE without its
// range, so it makes the whole file durable: the model errs on the side of
// keeping more there.
//
// A cut must happen while nothing is mounted: Mount.Unmount, Disk.Cut,
// Disk.Mount again, as a machine reboots. A process must not store into a
// mapping of a mount that the same process serves: the fault waits for the
// serving goroutine, which the garbage collector may have stopped while it
// waits for the faulting thread. Tests run the program under test in a
// child process.
package lazyfs
