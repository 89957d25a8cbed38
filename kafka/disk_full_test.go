package kafka

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// fillDisk writes a file into dir until the file system has no space left.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := 4096; n > 0; n /= 2 { // the last pages
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
}

// On a full disk the operator is told: a topic that a Metadata request
// would auto-create, and a produce to an existing topic, are answered
// KAFKA_STORAGE_ERROR (retriable, what Kafka answers for a failed log
// directory), not UNKNOWN_SERVER_ERROR, and each kind of failure is logged
// at ERROR (the default log level shows it), once however many requests
// fail.
func TestDiskFullAnsweredAndLogged(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a 64 MiB tmpfs at %s to fill (the test needs root or CAP_SYS_ADMIN): %v", root, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	// No disk reserve: the creation must meet the full disk itself (with
	// one, the engine refuses it before, as POLICY_VIOLATION naming the
	// reserve: engine.TestCreateTopicPastDiskReserveIsRefused).
	ts, logs := startServerEngine(t, filepath.Join(root, "data"), engine.Options{DiskReserve: -1}, Options{AutoCreateTopics: true})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, root)
	rc := dial(t, ts.addr)

	for range 3 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 9, true
		rt := kmsg.NewMetadataRequestTopic()
		name := "new"
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		if c := resp.Topics[0].ErrorCode; c != kerr.KafkaStorageError.Code {
			t.Fatalf("auto-creating a topic on a full disk: error %d (%v), want KAFKA_STORAGE_ERROR", c, kerr.ErrorForCode(c))
		}
	}
	if got := logs.matching("level=ERROR", "storage error", "api=Metadata", "no space left on device"); len(got) != 1 {
		t.Fatalf("%d ERROR lines about the topic the full disk could not take, want 1: %q", len(got), got)
	}

	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1700000000000, nil, bytes.Repeat([]byte("x"), 900_000), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	recs := bytes.Clone(b)
	refused := 0
	for range 64 { // the segment's space reserved ahead is a few MiB
		resp := rc.roundTrip(produceReq("t", map[int32][]byte{0: recs})).(*kmsg.ProduceResponse)
		switch c := resp.Topics[0].Partitions[0].ErrorCode; c {
		case 0:
		case kerr.KafkaStorageError.Code:
			refused++
		default:
			t.Fatalf("produce on a full disk: error %d (%v), want KAFKA_STORAGE_ERROR", c, kerr.ErrorForCode(c))
		}
		if refused == 3 {
			break
		}
	}
	if refused == 0 {
		t.Fatal("64 produces of 900 KB all succeeded on a full 64 MiB disk")
	}
	if got := logs.matching("level=ERROR", "storage error", "api=Produce"); len(got) == 0 {
		t.Fatalf("no ERROR line about the produce the full disk refused; log: %q", logs.matching(""))
	}
}
