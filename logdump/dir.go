package logdump

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// segmentFile is a .log file in a partition directory.
type segmentFile struct {
	path string
	base int64
}

// listLogs returns the .log files of dir: those named <20-digit base>.log,
// which make up the partition's log, in base-offset order, and the others
// by name. Opening a partition ignores the others, so they are no part of
// its log, but they are still segments one may want to look at.
func listLogs(dir string) (segs []segmentFile, others []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot list %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".log") {
			continue
		}
		path := filepath.Join(dir, name)
		if base, ok := parseBase(name, ".log"); ok {
			segs = append(segs, segmentFile{path, base})
		} else {
			others = append(others, path)
		}
	}
	slices.SortFunc(segs, func(a, b segmentFile) int { return cmp.Compare(a.base, b.base) })
	return segs, others, nil
}

// parseBase returns the base offset in a segment file name such as
// 00000000000000000042.index. It repeats segment.ParseName because the
// segment package is Linux-only and dumping is not.
func parseBase(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n >= 0
}

// cleanShutdownFile is the marker a clean close leaves. idemlog keeps it in
// the partition directory, Kafka in the data directory above.
const cleanShutdownFile = ".kafka_cleanshutdown"

// closedCleanly reports whether the partition directory dir (or the log
// directory above it, Kafka's place) holds the clean-shutdown marker.
func closedCleanly(dir string) bool {
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if _, err := os.Stat(filepath.Join(d, cleanShutdownFile)); err == nil {
			return true
		}
	}
	return false
}

// mayEndInZeros reports whether the segment at path may end in zeros, in
// a partition not closed cleanly: the last segment (the active one), the
// one rolled just before it (a crash can come before its seal trims it),
// and any the next open scans (its successor starts above the recovery
// point), whose preallocated space that open recovers. Verify accepts the
// same segments, so that dump shows every partition verify passes.
func mayEndInZeros(path string) bool {
	dir := filepath.Dir(path)
	base, ok := parseBase(filepath.Base(path), ".log")
	if !ok || closedCleanly(dir) {
		return false
	}
	segs, _, err := listLogs(dir)
	if err != nil {
		return false
	}
	i := slices.IndexFunc(segs, func(s segmentFile) bool { return s.base == base })
	switch {
	case i < 0:
		return false
	case i >= len(segs)-2:
		return true
	}
	rp, ok := idemlogRecoveryPoint(dir)
	return ok && segs[i+1].base > rp
}

// Suffixes of Kafka's log cleaning (LocalLog.replaceSegments): a cleaned
// segment is written as <base>.log.cleaned (and .index.cleaned, ...),
// renamed to .swap once complete, and renamed into place after the
// segments it replaces are renamed to .deleted. Opening a log finishes or
// undoes what a crash interrupted (LogLoader): every .cleaned file is
// deleted, and with it every .swap file at or above the lowest .cleaned
// base (a rename sequence that did not end); the other .swap files replace
// the segments whose offsets they cover; .deleted files are deleted.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
	deletedSuffix = ".deleted"
)

// cleaningFiles are the files a log cleaning leaves in a partition
// directory between its steps.
type cleaningFiles struct {
	// swapLogs are the <base>.log.swap files, in base order (segmentFile
	// path names the .swap file).
	swapLogs []segmentFile
	// swapOthers are the other .swap files (indexes), by name.
	swapOthers []swapOther
	// cleaned and deleted are the .cleaned and .deleted files; minCleaned
	// is the lowest base among the .cleaned ones (-1: none).
	cleaned, deleted []string
	minCleaned       int64
}

// swapOther is a .swap file other than a .log: its path and base.
type swapOther struct {
	path string
	base int64
}

// listCleaningFiles returns the cleaning files of dir.
func listCleaningFiles(dir string) (cleaningFiles, error) {
	c := cleaningFiles{minCleaned: -1}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return c, fmt.Errorf("cannot list %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			c.cleaned = append(c.cleaned, path)
			if base, ok := leadingBase(name); ok && (c.minCleaned < 0 || base < c.minCleaned) {
				c.minCleaned = base
			}
		case strings.HasSuffix(name, deletedSuffix):
			c.deleted = append(c.deleted, path)
		case strings.HasSuffix(name, ".log"+swapSuffix):
			if base, ok := parseBase(strings.TrimSuffix(name, swapSuffix), ".log"); ok {
				c.swapLogs = append(c.swapLogs, segmentFile{path, base})
			}
		case strings.HasSuffix(name, swapSuffix):
			if base, ok := leadingBase(name); ok {
				c.swapOthers = append(c.swapOthers, swapOther{path, base})
			}
		}
	}
	slices.SortFunc(c.swapLogs, func(a, b segmentFile) int { return cmp.Compare(a.base, b.base) })
	return c, nil
}

// hasSwapLog reports whether dir holds a <base>.log.swap file: a partition
// directory whose segment a cleaning replaced while its old files were
// being renamed away.
func hasSwapLog(dir string) bool {
	c, err := listCleaningFiles(dir)
	return err == nil && len(c.swapLogs) > 0
}

// leadingBase returns the base offset that starts a segment file name
// with any suffixes, such as 00000000000000000042.index.swap.
func leadingBase(name string) (int64, bool) {
	if len(name) < 21 || name[20] != '.' {
		return 0, false
	}
	return parseBase(name[:21], ".")
}
