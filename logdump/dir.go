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
