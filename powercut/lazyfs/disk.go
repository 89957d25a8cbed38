package lazyfs

import (
	"math/rand/v2"
	"sort"
	"sync"
	"syscall"
)

// PageSize is the unit a torn cut keeps or drops.
const PageSize = 4096

type page struct {
	data [PageSize]byte
	// seq orders the pages written since the last sync: a torn cut that
	// keeps a prefix of the writes keeps the pages with the lowest seq.
	seq uint64
}

// node is a file or a directory. A file's content is a sparse map of pages
// (an absent page reads as zeros) and a size, once as the kernel sees it
// (cur) and once as of the last fsync (dur). Pages are shared between the
// two images after a sync and copied on the next write (copy on write), so
// a sync costs a map copy, not a data copy.
type node struct {
	ino uint64
	dir bool

	// Directory: entries now and as of the last fsync of the directory.
	entries, durEntries map[string]*node

	// File.
	pages, durPages map[int64]*page
	size, durSize   int64
	mtime           int64
}

// Disk is the model: a tree of nodes with a durable image per node. It is
// safe for concurrent use; one mutex serializes every operation, which is
// what the tests' scale allows.
type Disk struct {
	mu      sync.Mutex
	root    *node
	nextIno uint64
	seq     uint64
	stats   Stats
}

// Stats counts what the disk was asked to do, so that tests can check the
// workload went through the paths the model must support.
type Stats struct {
	Writes, FileSyncs, DirSyncs, Renames, Unlinks, Truncates, Allocates int64
	// Cuts counts power cuts; TornPages the unsynced pages a torn cut kept.
	Cuts, TornPages int64
}

// NewDisk returns an empty disk whose root directory is durable.
func NewDisk() *Disk {
	d := &Disk{nextIno: 2}
	d.root = &node{ino: 1, dir: true, entries: map[string]*node{}, durEntries: map[string]*node{}}
	return d
}

// Stats returns the counters.
func (d *Disk) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

func (d *Disk) newNode(dir bool) *node {
	n := &node{ino: d.nextIno, dir: dir}
	d.nextIno++
	if dir {
		n.entries, n.durEntries = map[string]*node{}, map[string]*node{}
	} else {
		n.pages, n.durPages = map[int64]*page{}, map[int64]*page{}
	}
	return n
}

func (d *Disk) lookup(dir *node, name string) *node {
	d.mu.Lock()
	defer d.mu.Unlock()
	return dir.entries[name]
}

func (d *Disk) names(dir *node) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(dir.entries))
	for name := range dir.entries {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// create adds a new file or directory; the entry is volatile until the
// directory is synced.
func (d *Disk) create(dir *node, name string, isDir, excl bool) (*node, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := dir.entries[name]; old != nil {
		if excl || isDir || old.dir {
			return nil, syscall.EEXIST
		}
		return old, 0
	}
	n := d.newNode(isDir)
	dir.entries[name] = n
	return n, 0
}

func (d *Disk) unlink(dir *node, name string, wantDir bool) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := dir.entries[name]
	switch {
	case n == nil:
		return syscall.ENOENT
	case wantDir && !n.dir:
		return syscall.ENOTDIR
	case !wantDir && n.dir:
		return syscall.EISDIR
	case wantDir && len(n.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(dir.entries, name)
	d.stats.Unlinks++
	return 0
}

func (d *Disk) rename(from *node, name string, to *node, newName string) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := from.entries[name]
	if n == nil {
		return syscall.ENOENT
	}
	if old := to.entries[newName]; old != nil && old != n {
		if old.dir != n.dir {
			if old.dir {
				return syscall.EISDIR
			}
			return syscall.ENOTDIR
		}
		if old.dir && len(old.entries) > 0 {
			return syscall.ENOTEMPTY
		}
	}
	delete(from.entries, name)
	to.entries[newName] = n
	d.stats.Renames++
	return 0
}

func (d *Disk) attr(n *node) (size, mtime int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return n.size, n.mtime
}

// writablePage returns page p of n for writing, copying it first if the
// durable image shares it.
func (d *Disk) writablePage(n *node, p int64) *page {
	pg := n.pages[p]
	if pg == nil || pg == n.durPages[p] {
		np := &page{}
		if pg != nil {
			np.data = pg.data
		}
		n.pages[p] = np
		pg = np
	}
	d.seq++
	pg.seq = d.seq
	return pg
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (d *Disk) write(n *node, data []byte, off int64, now int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Writes++
	for len(data) > 0 {
		p, in := off/PageSize, int(off%PageSize)
		chunk := min(len(data), PageSize-in)
		// Zeros over an absent page change nothing the reader can see:
		// skipping them keeps zero-filled reservations cheap.
		if n.pages[p] != nil || !allZero(data[:chunk]) {
			copy(d.writablePage(n, p).data[in:], data[:chunk])
		}
		data, off = data[chunk:], off+int64(chunk)
	}
	n.size = max(n.size, off)
	n.mtime = now
}

func (d *Disk) read(n *node, dest []byte, off int64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off >= n.size {
		return 0
	}
	dest = dest[:min(int64(len(dest)), n.size-off)]
	total := len(dest)
	for len(dest) > 0 {
		p, in := off/PageSize, int(off%PageSize)
		chunk := min(len(dest), PageSize-in)
		if pg := n.pages[p]; pg != nil {
			copy(dest[:chunk], pg.data[in:])
		} else {
			clear(dest[:chunk])
		}
		dest, off = dest[chunk:], off+int64(chunk)
	}
	return total
}

func (d *Disk) truncate(n *node, size int64, now int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Truncates++
	if size < n.size {
		last := (size + PageSize - 1) / PageSize
		for p := range n.pages {
			if p >= last {
				delete(n.pages, p)
			}
		}
		if in := size % PageSize; in != 0 && n.pages[size/PageSize] != nil {
			clear(d.writablePage(n, size/PageSize).data[in:])
		}
	}
	n.size = size
	n.mtime = now
}

// allocate models fallocate: mode 0 extends the file (the reserved blocks
// read as zeros) and FALLOC_FL_KEEP_SIZE changes nothing visible; the
// other modes (punching holes, zeroing ranges) are not modelled.
func (d *Disk) allocate(n *node, off, length int64, mode uint32) syscall.Errno {
	const keepSize = 0x01
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Allocates++
	switch mode {
	case 0:
		n.size = max(n.size, off+length)
	case keepSize:
	default:
		return syscall.EOPNOTSUPP
	}
	return 0
}

// sync makes n's current state durable: a file's content and size, a
// directory's entries. It does not make n's own name durable; that takes a
// sync of the directory holding it.
func (d *Disk) sync(n *node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n.dir {
		d.stats.DirSyncs++
		n.durEntries = make(map[string]*node, len(n.entries))
		for k, v := range n.entries {
			n.durEntries[k] = v
		}
		return
	}
	d.stats.FileSyncs++
	n.durPages = make(map[int64]*page, len(n.pages))
	for k, v := range n.pages {
		n.durPages[k] = v
	}
	n.durSize = n.size
}

// Torn configures what a cut keeps of the writes no sync made durable.
type Torn struct {
	// Rand chooses; nil means a clean cut (nothing unsynced survives).
	Rand *rand.Rand
}

// Cut is a power loss: every file reverts to its content and size as of
// its last sync and every directory to its entries as of its last sync, so
// unsynced creations, renames, unlinks, truncations and writes are undone;
// what is no longer reachable from the root is gone. A torn cut (t.Rand
// set) also keeps some of the unsynced page writes: either a prefix of them
// in the order they were made (a disk that wrote back in order and lost
// power part way) or a random subset (a disk that reorders). Directory
// operations are never torn: a journaling filesystem commits them whole.
//
// Cut must run while nothing is mounted on the disk (the kernel's caches
// would otherwise keep the lost state visible).
func (d *Disk) Cut(t Torn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Cuts++
	var keep func(pg *page) bool
	if r := t.Rand; r != nil {
		if r.IntN(2) == 0 {
			cutoff := d.seq
			if d.seq > 0 {
				cutoff = r.Uint64N(d.seq + 1)
			}
			keep = func(pg *page) bool { return pg.seq <= cutoff }
		} else {
			keep = func(*page) bool { return r.IntN(2) == 0 }
		}
	}
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.dir {
			n.entries = make(map[string]*node, len(n.durEntries))
			names := make([]string, 0, len(n.durEntries))
			for k, v := range n.durEntries {
				n.entries[k] = v
				names = append(names, k)
			}
			sort.Strings(names) // deterministic for a seeded torn cut
			for _, k := range names {
				walk(n.durEntries[k])
			}
			return
		}
		d.cutFile(n, keep)
	}
	walk(d.root)
}

func (d *Disk) cutFile(n *node, keep func(*page) bool) {
	pages := make(map[int64]*page, len(n.durPages))
	for k, v := range n.durPages {
		pages[k] = v
	}
	size := n.durSize
	if keep != nil {
		// Candidates: pages within the current size that differ from
		// the durable image, in a fixed order.
		var cand []int64
		for p, pg := range n.pages {
			if pg != n.durPages[p] && p*PageSize < n.size {
				cand = append(cand, p)
			}
		}
		sort.Slice(cand, func(i, j int) bool { return cand[i] < cand[j] })
		for _, p := range cand {
			pg := n.pages[p]
			if !keep(pg) {
				continue
			}
			d.stats.TornPages++
			pages[p] = pg
			// A kept page past the durable size extends the file to
			// cover it, as far as the current size.
			size = max(size, min(n.size, (p+1)*PageSize))
		}
	}
	n.pages, n.size = pages, size
	n.durPages = make(map[int64]*page, len(pages))
	for k, v := range pages {
		n.durPages[k] = v
	}
	n.durSize = size
}
