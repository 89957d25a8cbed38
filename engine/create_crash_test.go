package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/internal/testutil"
)

const (
	createCrashDirEnv  = "IDEMLOG_CREATE_CRASH_DIR"
	createCrashStepEnv = "IDEMLOG_CREATE_CRASH_STEP"
)

// TestCreateTopicCrash kills a process (SIGKILL) at each step of a
// CreateTopic of three partitions: after their temporary directories are
// durable, after the creation intent, and after the first rename. The
// renames used to run one by one with nothing recorded: a crash between
// them left a topic with some of its partitions for good (Open removed the
// temporary directories of the rest), which a client that had seen the
// topic, or a mirror copying it, found short ever after. Now the topic is
// either absent (before the intent) or whole (after it), and nothing
// temporary is left in the data dir.
func TestCreateTopicCrash(t *testing.T) {
	for step, want := range map[string]int{"synced": 0, "intent": 3, "renamed one": 3} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			child := testutil.StartChild(t, "TestCreateTopicCrashChild", createCrashDirEnv+"="+dir, createCrashStepEnv+"="+step)
			if res := child.Watch(t, step, killAtStep(child, step)); !res.Killed {
				t.Fatalf("the child was not killed at its step: %v", res.Err)
			}
			e := openEngine(t, dir, Options{})
			defer e.Close()
			if got := e.Topics()["t"]; got != want {
				t.Fatalf("topic t has %d partitions after the crash, want %d", got, want)
			}
			entries, _ := os.ReadDir(dir)
			for _, ent := range entries {
				if strings.HasPrefix(ent.Name(), createDirPrefix) || strings.HasPrefix(ent.Name(), creationIntentPrefix) {
					t.Fatalf("left in the data dir: %s", ent.Name())
				}
			}
			for i := range want {
				p, err := e.Partition("t", i)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.Append(idem(t, -1, -1, -1, 1, 1)); err != nil {
					t.Fatalf("t-%d: %v", i, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, partitionKey("t", 0), topicConfigFile)); want > 0 && err != nil {
				t.Fatalf("t-0 without its topic.config: %v", err)
			}
		})
	}
}

// killAtStep watches a child that says "at STEP" when it reaches a step
// and waits there: the parent kills it at once; any other line fails the
// test.
func killAtStep(child *testutil.Child, step string) testutil.Watch {
	return testutil.Watch{Line: func(f []string) error {
		if line := strings.Join(f, " "); line != "at "+step {
			return fmt.Errorf("child said %q, want %q", line, "at "+step)
		}
		child.Kill()
		return nil
	}}
}

func TestCreateTopicCrashChild(t *testing.T) {
	dir, step := os.Getenv(createCrashDirEnv), os.Getenv(createCrashStepEnv)
	if dir == "" {
		t.Skip("run by TestCreateTopicCrash")
	}
	e, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error", err)
		time.Sleep(time.Hour)
	}
	e.opts.private.createTopicStepHook = func(_, s string) {
		if s == step {
			fmt.Println("at " + s)
			time.Sleep(time.Hour)
		}
	}
	if err := e.CreateTopic("t", 3, map[string]string{"retention.ms": "60000"}); err != nil {
		fmt.Println("error", err)
	}
	fmt.Println("returned")
	time.Sleep(time.Hour)
}
