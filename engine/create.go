package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemlog/idemlog/internal/fsutil"
	"golang.org/x/sys/unix"
)

// syncfsMinDirs is the number of new partition directories from which
// createPartitionDirs makes them durable with one syncfs(2) rather than
// an fsync per file and directory (four per partition). syncfs also
// writes back whatever else is dirty on the filesystem, which a few
// partitions do not justify.
const syncfsMinDirs = 8

// createPartitionDirs makes the directories of new partitions keys, each
// with its topic config and partition.metadata, and nothing else: a
// directory without segments opens dormant and gets its first segment at
// the first append (see partition.Options.Lazy).
//
// Each is built under a temporary name (createDirPrefix) and renamed to
// its key once its files are durable; the data dir is synced once after
// the renames. A crash before a rename leaves a temporary directory that
// Open removes; after it, a directory whose files were already durable,
// so a partition never comes back without its config or topic id. The
// files are written unsynced and made durable together, by one syncfs of
// the filesystem for a large batch or an fsync of each file and directory
// for a small one, before any rename: about two device flushes for a
// topic of thousands of partitions instead of several per partition.
//
// It returns the keys renamed into place; on error the others are gone.
func createPartitionDirs(dataDir string, keys []string, cfg map[string]string, id [16]byte) (created []string, err error) {
	files := map[string][]byte{partitionMetadataFile: partitionMetadataBytes(id), topicConfigFile: topicConfigBytes(cfg)}
	tmps := make([]string, 0, len(keys))
	defer func() {
		for _, tmp := range tmps[len(created):] {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, key := range keys {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", key, err)
		}
		tmp := filepath.Join(dataDir, createDirPrefix+hex.EncodeToString(rnd[:]))
		if err := os.Mkdir(tmp, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", key, err)
		}
		tmps = append(tmps, tmp)
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
				return nil, fmt.Errorf("cannot create %s: %w", key, err)
			}
		}
	}
	if err := syncNewDirs(dataDir, tmps, files); err != nil {
		return nil, fmt.Errorf("cannot create %d partitions: %w", len(keys), err)
	}
	var renameErr error
	for i, key := range keys {
		if renameErr = os.Rename(tmps[i], filepath.Join(dataDir, key)); renameErr != nil {
			renameErr = fmt.Errorf("cannot create %s: %w", key, renameErr)
			break
		}
		created = append(created, key)
	}
	if len(created) > 0 {
		if err := fsutil.SyncDir(dataDir); err != nil {
			return created, errors.Join(renameErr, fmt.Errorf("cannot create %d partitions: %w", len(created), err))
		}
	}
	return created, renameErr
}

// syncNewDirs makes the directories dirs, and the files named in files in
// each, durable: with one syncfs(2) on dataDir's filesystem when there
// are many, else with an fsync of each.
func syncNewDirs(dataDir string, dirs []string, files map[string][]byte) error {
	if len(dirs) >= syncfsMinDirs {
		d, err := os.Open(dataDir)
		if err != nil {
			return err
		}
		defer d.Close()
		if err := unix.Syncfs(int(d.Fd())); err != nil {
			return fmt.Errorf("cannot sync the filesystem of %s: %w", dataDir, err)
		}
		return nil
	}
	for _, dir := range dirs {
		for name := range files {
			if err := fsutil.SyncFile(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
		if err := fsutil.SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}
