package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/internal/childproc"
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
			child := childproc.Start(t, "TestCreateTopicCrashChild", createCrashDirEnv+"="+dir, createCrashStepEnv+"="+step)
			select {
			case line, ok := <-child.Lines:
				if !ok || line != "at "+step {
					child.Abort()
					t.Fatalf("child: %q", line)
				}
				child.Kill()
			case <-time.After(time.Minute):
				child.Abort()
				t.Fatal("the child did not reach the step in a minute")
			}
			for range child.Lines {
			}
			if killed, err := child.Wait(); !killed {
				t.Fatalf("the child was not killed: %v", err)
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
	createTopicStepHook = func(_, s string) {
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
