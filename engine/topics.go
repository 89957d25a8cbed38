package engine

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"
)

// IsInternalTopic reports whether topic is one of the engine's internal
// topics (__consumer_offsets, __transaction_state): Kafka's is_internal
// in Metadata. They cannot be deleted and are exempt from retention.
func IsInternalTopic(topic string) bool {
	return topic == ConsumerOffsetsTopic || topic == txnStateTopic
}

// Topic ids.
//
// Every topic has a 16-byte id (Kafka's topic UUID, Metadata v10+, Fetch
// v13+), stored Kafka's way in each of its partition directories as
// partition.metadata:
//
//	version: 0
//	topic_id: <the 16 bytes, base64url without padding>
//
// CreateTopic draws a random (version 4) id for a new topic and reuses the
// topic's id when it adds partitions. A partition directory without the
// file (written before ids existed, or created by a CreateTopic that
// crashed before writing it) gets its topic's id at Open, or a new one if
// no partition of the topic has one. A deleted and recreated topic gets a
// new id, as in Kafka.

const partitionMetadataFile = "partition.metadata"

// topicIDs maps topics to ids and back. It is replaced, never edited
// (under Engine.mu), so lookups take no lock.
type topicIDs struct {
	byName map[string][16]byte
	byID   map[[16]byte]string
}

func (t *topicIDs) with(topic string, id [16]byte) *topicIDs {
	n := &topicIDs{byName: maps.Clone(t.byName), byID: maps.Clone(t.byID)}
	n.byName[topic] = id
	n.byID[id] = topic
	return n
}

func (t *topicIDs) without(topic string) *topicIDs {
	n := &topicIDs{byName: maps.Clone(t.byName), byID: maps.Clone(t.byID)}
	if id, ok := n.byName[topic]; ok {
		delete(n.byName, topic)
		delete(n.byID, id)
	}
	return n
}

// topicIDOf: see Frontend.TopicID.
func (e *Engine) topicIDOf(topic string) ([16]byte, bool) {
	id, ok := e.ids.Load().byName[topic]
	return id, ok
}

// topicByID: see Frontend.TopicByID.
func (e *Engine) topicByID(id [16]byte) (string, bool) {
	topic, ok := e.ids.Load().byID[id]
	return topic, ok
}

// TopicID returns the partition's topic id.
func (p *Partition) TopicID() [16]byte { return p.topicID }

// newTopicID returns a random version 4 UUID that is not one Kafka
// reserves (all zeros, which means "no id"; 1, the metadata topic's) and
// whose text does not start with '-' (Kafka avoids those, which tools
// would take for flags).
func newTopicID(taken map[[16]byte]string) ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("cannot make a topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40                       // version 4
		id[8] = id[8]&0x3f | 0x80                       // RFC 4122 variant
		if _, dup := taken[id]; dup || id[0]>>2 == 62 { // base64url '-' is 62
			continue
		}
		return id, nil
	}
}

// topicIDString: see Frontend.TopicIDString.
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// readPartitionMetadata reads dir's partition.metadata; ok is false when
// there is none. A file that is not Kafka's version 0 layout is an error,
// not a missing id: replacing it could change the topic's id.
func readPartitionMetadata(dir string) (id [16]byte, ok bool, err error) {
	path := filepath.Join(dir, partitionMetadataFile)
	data, err := fsutil.ReadFileMax(path, maxMetadataFile)
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if errors.Is(err, fsutil.ErrFileTooLarge) {
		return id, false, fmt.Errorf("cannot read %s: %w: %w", path, ErrCorruptMetadata, err)
	}
	if err != nil {
		return id, false, fmt.Errorf("cannot read %s: %w", path, err)
	}
	var version, topicID string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ": ")
		switch {
		case !found:
			return id, false, fmt.Errorf("cannot read %s: malformed line %q: %w", path, sc.Text(), ErrCorruptMetadata)
		case k == "version":
			version = v
		case k == "topic_id":
			topicID = v
		}
	}
	if err := sc.Err(); err != nil {
		return id, false, fmt.Errorf("cannot read %s: %w: %w", path, ErrCorruptMetadata, err)
	}
	if version != "0" {
		return id, false, fmt.Errorf("cannot read %s: version %q, want 0: %w", path, version, ErrCorruptMetadata)
	}
	raw, err := base64.RawURLEncoding.DecodeString(topicID)
	if err != nil || len(raw) != 16 || [16]byte(raw) == ([16]byte{}) {
		return id, false, fmt.Errorf("cannot read %s: bad topic id %q: %w", path, topicID, ErrCorruptMetadata)
	}
	return [16]byte(raw), true, nil
}

// writePartitionMetadata writes dir's partition.metadata atomically and
// makes it durable.
func writePartitionMetadata(dir string, id [16]byte) error {
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, partitionMetadataFile), partitionMetadataBytes(id)); err != nil {
		return err
	}
	return fsutil.SyncDir(dir)
}

// partitionMetadataBytes is the content of partition.metadata.
func partitionMetadataBytes(id [16]byte) []byte {
	return fmt.Appendf(nil, "version: 0\ntopic_id: %s\n", topicIDString(id))
}

// assignTopicIDs gives every partition opened from disk its topic's id,
// writing partition.metadata where it is missing, and returns the index.
func assignTopicIDs(parts map[string]*Partition, has map[*Partition]bool) (*topicIDs, error) {
	byTopic := map[string][]*Partition{}
	for _, p := range parts {
		byTopic[p.topic] = append(byTopic[p.topic], p)
	}
	ids := &topicIDs{byName: map[string][16]byte{}, byID: map[[16]byte]string{}}
	topics := make([]string, 0, len(byTopic))
	for topic := range byTopic {
		topics = append(topics, topic)
	}
	sort.Strings(topics)
	// Ids on disk first, so that a new one never takes an existing one.
	missing := []string{}
	for _, topic := range topics {
		ps := byTopic[topic]
		sort.Slice(ps, func(i, j int) bool { return ps[i].index < ps[j].index })
		var id [16]byte
		found := false
		for _, p := range ps {
			if !has[p] {
				continue
			}
			if !found {
				id, found = p.topicID, true
			} else if p.topicID != id {
				return nil, fmt.Errorf("cannot open topic %q: partition %d has topic id %s, partition %d %s", topic,
					ps[0].index, topicIDString(id), p.index, topicIDString(p.topicID))
			}
		}
		if !found {
			missing = append(missing, topic)
			continue
		}
		if other, dup := ids.byID[id]; dup {
			return nil, fmt.Errorf("cannot open topic %q: topic id %s is also %q's", topic, topicIDString(id), other)
		}
		ids.byName[topic], ids.byID[id] = id, topic
	}
	for _, topic := range missing {
		id, err := newTopicID(ids.byID)
		if err != nil {
			return nil, err
		}
		ids.byName[topic], ids.byID[id] = id, topic
	}
	for _, topic := range topics {
		id := ids.byName[topic]
		for _, p := range byTopic[topic] {
			p.topicID = id
			if !has[p] {
				if err := writePartitionMetadata(p.log.Dir(), id); err != nil {
					return nil, err
				}
			}
		}
	}
	return ids, nil
}

// Topic deletion.
//
// DeleteTopic takes the topic's partitions out of the lookup map, closes
// their logs and renames each directory to "<topic>-<n>.<32 hex>-delete"
// (Kafka's name for a log awaiting deletion), which Open does not take for
// a partition; after one sync of the data directory the deletion is
// durable and the directories are removed. Open removes any "-delete"
// directory left by a crash. Partitions are renamed from the highest index
// down, so a crash in the middle leaves the topic with its first
// partitions, a smaller but whole topic (DeleteTopic again finishes it).

const deleteDirSuffix = "-delete"

// createDirPrefix names a partition directory being created (CreateTopic):
// it is renamed to its partition's name once its files are in place, and
// Open removes one a crash left.
const createDirPrefix = ".create-"

// isDeleteDir reports whether name is a directory DeleteTopic renamed.
func isDeleteDir(ent os.DirEntry) bool {
	name, ok := strings.CutSuffix(ent.Name(), deleteDirSuffix)
	if !ok || !ent.IsDir() {
		return false
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 || len(name)-i-1 != 32 {
		return false
	}
	if _, err := hex.DecodeString(name[i+1:]); err != nil {
		return false
	}
	_, _, ok = parsePartitionName(name[:i])
	// DeleteTopic shortens a long partition name to keep the whole within
	// a file name's 255 bytes: what is left of it need not end in "-<n>".
	// (Without this: such leftovers were never removed.)
	return ok || (len(ent.Name()) == maxFileName && ValidateTopic(name[:i]) == nil)
}

// maxFileName is the longest file name Linux filesystems take.
const maxFileName = 255

// DeleteTopic deletes a topic: ErrUnknownTopicOrPartition if there is
// none, ErrInternalTopic for the internal topics. On return the topic is
// gone from lookups and from disk (a failed removal of its renamed
// directories is not reported: Open removes them). Appends and markers in
// flight on its partitions fail with ErrUnknownTopicOrPartition, reads
// with partition.ErrClosed; chunks already read stay valid until
// released. Creating the topic again gives new, empty partitions and a
// new topic id.
//
// Every group's committed offsets of the topic are deleted with it, as
// Kafka's group coordinator deletes them (a tombstone each); transactional
// ones still pending become current if their transaction commits.
//
// The deletion is atomic with respect to those offsets across a crash,
// under every sync policy, in this order (each step durable before the
// next): a deletion intent naming the topic and its id in the data dir,
// the tombstones, the renames of the partition directories, the intent's
// removal. A crash before the renames leaves the topic and the intent:
// Open deletes the topic again, so no run after the crash sees the topic
// without its offsets for longer than its Open; a crash after them leaves
// the tombstones, so a topic created again under the name never finds the
// old offsets. An error returned with the topic still listed leaves the
// intent too: a retry, or the next Open, finishes the deletion.
func (e *Engine) DeleteTopic(topic string) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if IsInternalTopic(topic) {
		return fmt.Errorf("cannot delete topic %q: %w", topic, ErrInternalTopic)
	}
	// The offsets store, if offsets were ever committed here, is opened
	// first: offsets takes offsetsMu before mu.
	var offsets *offsetStore
	if _, used := e.Topics()[ConsumerOffsetsTopic]; used {
		var err error
		if offsets, err = e.offsets(); err != nil {
			return fmt.Errorf("cannot delete topic %q: %w", topic, err)
		}
	}
	renamed, err := e.deleteTopicLocked(topic, offsets)
	for _, dir := range renamed {
		_ = os.RemoveAll(dir)
	}
	return err
}

// deleteTopicLocked is DeleteTopic's work under mu; it returns the renamed
// directories, for the caller to remove without mu.
func (e *Engine) deleteTopicLocked(topic string, offsets *offsetStore) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waitCreationsLocked(topic)
	if e.closed.Load() {
		return nil, ErrClosed
	}
	before, ids := e.parts.Load(), e.ids.Load()
	parts := maps.Clone(*before)
	var gone []*Partition
	for key, p := range parts {
		if p.topic == topic {
			gone = append(gone, p)
			delete(parts, key)
		}
	}
	if len(gone) == 0 {
		return nil, fmt.Errorf("cannot delete topic %q: %w", topic, ErrUnknownTopicOrPartition)
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].index > gone[j].index })
	intent := deletionIntentPath(e.dir, ids.byName[topic])
	if err := writeDeletionIntent(intent, topic); err != nil {
		return nil, fmt.Errorf("cannot delete topic %q: %w", topic, err)
	}
	e.opts.private.deleteTopicStep("intent")
	e.parts.Store(&parts)
	e.ids.Store(ids.without(topic))
	if offsets != nil {
		// Under mu, so that no creation of the topic anew, and no commit
		// of its offsets, comes between the deletion and this. Commits
		// take mu only before their partition's locks, never under them.
		if err := offsets.deleteTopic(topic); err != nil {
			// The topic stays, with the intent: the tombstones written
			// are durable, the rest are written by the retry or by Open.
			e.parts.Store(before)
			e.ids.Store(ids)
			return nil, fmt.Errorf("cannot delete committed offsets of topic %q: %w", topic, err)
		}
	}
	e.opts.private.deleteTopicStep("tombstones")
	renamed, err := e.retirePartitions(gone)
	e.opts.private.deleteTopicStep("renames")
	if err == nil {
		err = removeDeletionIntent(e.dir, intent)
	}
	return renamed, err
}

// deletionIntentPrefix starts the name of a deletion intent file in the
// data dir: the prefix, then the topic id in hex; the topic's name inside.
const deletionIntentPrefix = ".delete-topic-"

func deletionIntentPath(dataDir string, id [16]byte) string {
	return filepath.Join(dataDir, deletionIntentPrefix+hex.EncodeToString(id[:]))
}

// writeDeletionIntent writes the intent file at path, durably (its data
// and its name).
func writeDeletionIntent(path, topic string) error {
	if err := fsutil.WriteFileAtomic(path, []byte(topic)); err != nil {
		return err
	}
	return fsutil.SyncDir(filepath.Dir(path))
}

// removeDeletionIntent removes the intent at path, durably: an intent
// brought back by a machine crash after a topic of the name was created
// again would have the next Open delete it (if the ids matched, which
// they do not; the removal is durable all the same).
func removeDeletionIntent(dataDir, path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot finish deletion: %w", err)
	}
	return fsutil.SyncDir(dataDir)
}

// finishDeletions completes, at Open, the deletions that a crash or an
// error cut short: an intent whose topic is still there with the intent's
// id is deleted again (DeleteTopic); any other intent is stale (the
// renames were made, after the tombstones) and removed.
func (e *Engine) finishDeletions() error {
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		return fmt.Errorf("cannot list data dir: %w", err)
	}
	for _, ent := range entries {
		idHex, ok := strings.CutPrefix(ent.Name(), deletionIntentPrefix)
		if !ok || ent.IsDir() {
			continue
		}
		if strings.HasSuffix(idHex, ".tmp") { // an intent's write cut short
			_ = os.Remove(filepath.Join(e.dir, ent.Name()))
			continue
		}
		path := filepath.Join(e.dir, ent.Name())
		name, rerr := fsutil.ReadFileMax(path, maxFileName)
		var id [16]byte
		if n, derr := hex.Decode(id[:], []byte(idHex)); rerr == nil && derr == nil && n == len(id) &&
			e.ids.Load().byName[string(name)] == id && ValidateTopic(string(name)) == nil {
			if err := e.DeleteTopic(string(name)); err != nil {
				return fmt.Errorf("cannot finish the deletion of topic %q: %w", name, err)
			}
			continue
		}
		if err := removeDeletionIntent(e.dir, path); err != nil {
			return err
		}
	}
	return nil
}

// retirePartitions closes the partitions and renames their directories
// for deletion (under mu); it returns the new names.
func (e *Engine) retirePartitions(gone []*Partition) ([]string, error) {
	var renamed []string
	var errs []error
	for _, p := range gone {
		p.deleted.Store(true)
		// The log is closed cleanly, though its files are about to go: a
		// failed log's Close reports the failure, which does not matter
		// here; the data is being deleted.
		_ = p.close()
		var suffix [16]byte
		if _, err := rand.Read(suffix[:]); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete %s-%d: %w", p.topic, p.index, err))
			continue
		}
		dir := p.log.Dir()
		// Kafka's rule: the name may be shortened, the suffix not. A
		// 249-byte topic's partition name plus the suffix is past the
		// 255-byte limit of a file name. (Without this: such a topic could
		// not be deleted.)
		tail := "." + hex.EncodeToString(suffix[:]) + deleteDirSuffix
		base := filepath.Base(dir)
		to := filepath.Join(filepath.Dir(dir), base[:min(len(base), maxFileName-len(tail))]+tail)
		if err := os.Rename(dir, to); err != nil {
			// The directory keeps its name: the partition comes back at the
			// next Open.
			errs = append(errs, fmt.Errorf("cannot delete %s-%d: %w", p.topic, p.index, err))
			continue
		}
		renamed = append(renamed, to)
	}
	if len(renamed) > 0 {
		if err := fsutil.SyncDir(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete topic %q: %w", gone[0].topic, err))
		}
	}
	return renamed, errors.Join(errs...)
}

// maxMetadataFile bounds partition.metadata and topic.config, read whole
// at open: what idemlog writes there is a few hundred bytes.
const maxMetadataFile = 1 << 20
