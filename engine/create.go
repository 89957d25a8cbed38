package engine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
// Each is built under a temporary name (createDirPrefix, the topic id and
// the partition's index) and renamed to its key once its files are
// durable; the data dir is synced once after the renames. The files are
// written unsynced and made durable together, by one syncfs of the
// filesystem for a large batch or an fsync of each file and directory
// for a small one, before any rename: about two device flushes for a
// topic of thousands of partitions instead of several per partition.
//
// A creation is all or nothing across a crash. With one partition the
// rename decides. With several, a creation intent (creationIntentPrefix
// and the topic id, holding the topic and the indexes) is made durable
// before the first rename: a crash before it leaves only temporary
// directories, which Open removes; a crash after it leaves the intent,
// and Open renames the rest (finishCreations). A topic never comes back
// with some of the partitions it was created with: a client that saw it
// (or a mirror that copied it) would otherwise find it short for good.
//
// It returns the keys renamed into place; on error the others are gone,
// or, once the intent is durable, left for the next Open to finish.
func createPartitionDirs(dataDir, topic string, indexes []int, cfg map[string]string, id [16]byte, knobs *testKnobs) (created []string, err error) {
	files := map[string][]byte{partitionMetadataFile: partitionMetadataBytes(id), topicConfigFile: topicConfigBytes(cfg)}
	tmps := make([]string, len(indexes))
	for i, index := range indexes {
		tmps[i] = filepath.Join(dataDir, creationTempName(id, index))
	}
	intent := ""
	defer func() {
		if intent != "" {
			return // the next Open finishes the renames
		}
		for _, tmp := range tmps[len(created):] {
			_ = os.RemoveAll(tmp)
		}
	}()
	// One after the other: in parallel, the creates contend in the
	// filesystem (ext4 took 8x the CPU with eight writers on two cores).
	for i, index := range indexes {
		if err := writeNewDir(tmps[i], files); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", partitionKey(topic, index), err)
		}
	}
	if err := syncNewDirs(dataDir, tmps, files); err != nil {
		return nil, fmt.Errorf("cannot create %d partitions: %w", len(indexes), err)
	}
	knobs.createTopicStep(topic, "synced")
	if len(indexes) > 1 {
		path, err := writeCreationIntent(dataDir, topic, indexes, id)
		if err != nil {
			return nil, err
		}
		intent = path
		knobs.createTopicStep(topic, "intent")
	}
	var renameErr error
	for i, index := range indexes {
		key := partitionKey(topic, index)
		if renameErr = os.Rename(tmps[i], filepath.Join(dataDir, key)); renameErr != nil {
			renameErr = fmt.Errorf("cannot create %s: %w", key, renameErr)
			break
		}
		created = append(created, key)
		if i == 0 {
			knobs.createTopicStep(topic, "renamed one")
		}
	}
	if len(created) > 0 {
		if err := fsutil.SyncDir(dataDir); err != nil {
			return created, errors.Join(renameErr, fmt.Errorf("cannot create %d partitions: %w", len(created), err))
		}
	}
	if renameErr == nil && intent != "" {
		// Done: the intent goes. Unsynced: should its removal be lost,
		// Open finds every partition in place and removes it again.
		_ = os.Remove(intent)
		intent = ""
	}
	return created, renameErr
}

// writeNewDir makes the directory dir holding files, unsynced.
func writeNewDir(dir string, files map[string][]byte) error {
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		// A leftover of a creation that failed in this process.
		if err = os.RemoveAll(dir); err == nil {
			err = os.Mkdir(dir, 0o755)
		}
	}
	if err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// creationIntentPrefix names a creation intent file (createPartitionDirs),
// followed by the topic id in hex. It must not start with createDirPrefix,
// whose entries Open removes.
const creationIntentPrefix = ".creating-topic-"

// creationTempName is the temporary name of a new partition's directory.
func creationTempName(id [16]byte, index int) string {
	return createDirPrefix + hex.EncodeToString(id[:]) + "-" + strconv.Itoa(index)
}

// writeCreationIntent durably records that topic's partitions indexes are
// being renamed into place: the topic, then one index a line.
func writeCreationIntent(dataDir, topic string, indexes []int, id [16]byte) (string, error) {
	var b strings.Builder
	b.WriteString(topic)
	b.WriteByte('\n')
	for _, i := range indexes {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	path := filepath.Join(dataDir, creationIntentPrefix+hex.EncodeToString(id[:]))
	if err := fsutil.WriteFileAtomic(path, []byte(b.String())); err != nil {
		return "", fmt.Errorf("cannot record the creation of %q: %w", topic, err)
	}
	if err := fsutil.SyncDir(dataDir); err != nil {
		return "", fmt.Errorf("cannot record the creation of %q: %w", topic, err)
	}
	return path, nil
}

// maxCreationIntent bounds an intent file read at Open: a topic name and
// the indexes of up to 2^20 partitions (createTopic's bound).
const maxCreationIntent = 1 << 24

// finishCreations completes, at Open and before the temporary directories
// are removed, the creations a crash cut short after their intent was
// durable: every temporary directory an intent names is renamed into
// place, then the intent goes.
func finishCreations(dataDir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return fmt.Errorf("cannot list data dir: %w", err)
	}
	for _, ent := range entries {
		idHex, ok := strings.CutPrefix(ent.Name(), creationIntentPrefix)
		if !ok || ent.IsDir() {
			continue
		}
		path := filepath.Join(dataDir, ent.Name())
		var id [16]byte
		data, rerr := fsutil.ReadFileMax(path, maxCreationIntent)
		n, derr := hex.Decode(id[:], []byte(idHex))
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if rerr != nil || derr != nil || n != len(id) || len(lines) < 2 || ValidateTopic(lines[0]) != nil {
			// Not one WriteFileAtomic completed (a .tmp, say): its renames
			// never started.
			_ = os.Remove(path)
			continue
		}
		topic, renamed := lines[0], 0
		for _, l := range lines[1:] {
			index, err := strconv.Atoi(l)
			if err != nil || index < 0 {
				continue
			}
			tmp := filepath.Join(dataDir, creationTempName(id, index))
			key := filepath.Join(dataDir, partitionKey(topic, index))
			if !fsutil.Exists(tmp) || fsutil.Exists(key) {
				continue
			}
			if err := os.Rename(tmp, key); err != nil {
				return fmt.Errorf("cannot finish the creation of %s: %w", partitionKey(topic, index), err)
			}
			renamed++
		}
		if err := fsutil.SyncDir(dataDir); err != nil {
			return err
		}
		if renamed > 0 {
			log.Warn("finished a topic creation cut short by a crash", "topic", topic, "partitions_renamed", renamed)
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("cannot remove %s: %w", ent.Name(), err)
		}
	}
	return nil
}

// syncNewDirs makes the directories dirs, and the files named in files in
// each, durable: with one syncfs(2) on dataDir's filesystem when there
// are many, else with an fsync of each.
func syncNewDirs(dataDir string, dirs []string, files map[string][]byte) error {
	if len(dirs) >= syncfsMinDirs && syncfsDurable(dataDir) {
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

// fuseSuperMagic is the f_type statfs(2) reports for a FUSE filesystem.
const fuseSuperMagic = 0x65735546

// syncfsDurable reports whether syncfs(2) on dir's filesystem makes its
// files durable. Not on FUSE: the kernel writes the dirty pages back to
// the server but sends it no fsync (only virtiofs-like servers get one), so
// a server that keeps data volatile until fsync, as a network or
// power-cut-testing filesystem may, would lose what syncfs was trusted
// with. There every file is fsynced itself.
func syncfsDurable(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type != fuseSuperMagic
}
