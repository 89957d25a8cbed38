package lint

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// historyWords matches text that records when or by whom something was
// written (a numbered round of changes, a note naming who found a bug)
// instead of what it is or why it holds. The pattern is assembled from
// parts so that this file does not match it.
var historyWords = regexp.MustCompile(`(?i)` + `review ?[0-9]|` + `from` + ` review|` + `session [0-9]`)

// historyTestFunc matches a test or benchmark named after such a round
// rather than after what it checks.
var historyTestFunc = regexp.MustCompile(`(?m)^func (?:Test|Benchmark)` + `Review\w*\(`)

// historyExempt lists files the rule does not read yet, each with the
// reason; an entry goes when its file is brought in line.
var historyExempt = map[string]string{}

// historyProblems returns what the naming rule finds in one repository
// file: its name, a test or benchmark function name, or its text.
func historyProblems(name string, content []byte) []string {
	var out []string
	base := path.Base(name)
	if strings.HasSuffix(base, "_test.go") && strings.Contains(strings.ToLower(base), "review") {
		out = append(out, fmt.Sprintf("%s: test file named after a round of changes, not after what it tests", name))
	}
	if strings.HasSuffix(name, ".go") {
		for _, m := range historyTestFunc.FindAll(content, -1) {
			out = append(out, fmt.Sprintf("%s: %s: test named after a round of changes, not after what it checks", name, bytes.TrimSuffix(bytes.TrimPrefix(m, []byte("func ")), []byte("("))))
		}
	}
	for i, line := range bytes.Split(content, []byte("\n")) {
		if loc := historyWords.FindIndex(line); loc != nil {
			out = append(out, fmt.Sprintf("%s:%d: %q: say what the code guarantees and why, not when or by whom it was found", name, i+1, line[loc[0]:loc[1]]))
		}
	}
	return out
}

// repositoryFiles lists the tracked files (git ls-files), or, outside a
// git checkout (a source archive), every file under the root but .git.
func repositoryFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = moduleRoot
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(moduleRoot, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestNoHistoryNames: files, tests and comments are named after what they
// test, check or guarantee, so that a reader finds a behaviour's tests by
// its name and reads the invariant instead of the story of a change.
func TestNoHistoryNames(t *testing.T) {
	files := repositoryFiles(t)
	if len(files) < 50 {
		t.Fatalf("found %d files under %s: the walk does not see the repository", len(files), moduleRoot)
	}
	for _, f := range files {
		if _, ok := historyExempt[f]; ok {
			continue
		}
		content, err := os.ReadFile(filepath.Join(moduleRoot, filepath.FromSlash(f)))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(content, 0) >= 0 {
			continue // binary
		}
		for _, p := range historyProblems(f, content) {
			t.Error(p)
		}
	}
	for f := range historyExempt {
		if _, err := os.Stat(filepath.Join(moduleRoot, filepath.FromSlash(f))); err != nil {
			t.Errorf("historyExempt names %s, which is gone: remove the entry", f)
		}
	}
}

// TestHistoryProblemsFinds: the rule catches each form it is meant to
// catch and leaves ordinary words alone, so that TestNoHistoryNames
// passing means something.
func TestHistoryProblemsFinds(t *testing.T) {
	bad := []struct{ name, content string }{
		{"engine/snapshot_rev" + "iew16_test.go", "package engine\n"},
		{"kafka/admin_" + "review_test.go", "package kafka\n"},
		{"engine/x_test.go", "package engine\n\nfunc TestRev" + "iew20Crash(t *testing.T) {}\n"},
		{"engine/x_test.go", "package engine\n\nfunc Benchmark" + "ReviewAppend(b *testing.B) {}\n"},
		{"engine/x.go", "// the offset is kept. (From" + " review: it was lost.)\n"},
		{"engine/x.go", "// (from" + " review)\n"},
		{"engine/x_test.go", "// Review" + " 28: the admin APIs\n"},
		{"engine/x_test.go", "// as in review" + "16\n"},
		{"docs/x.md", "Measured in session" + " 9.\n"},
	}
	for _, c := range bad {
		if got := historyProblems(c.name, []byte(c.content)); len(got) == 0 {
			t.Errorf("%s with %q: no problem found", c.name, c.content)
		}
	}
	good := []struct{ name, content string }{
		{"engine/snapshot_test.go", "package engine\n\nfunc TestSnapshotRetention(t *testing.T) {}\n"},
		{"kafka/group/session_test.go", "// the session timeout 300ms expires\n"},
		{"docs/x.md", "Reviewers check the invariant; a review of the design.\n"},
		{"engine/x_test.go", "// TestPreview: the preview is kept for 5 s\n"},
	}
	for _, c := range good {
		if got := historyProblems(c.name, []byte(c.content)); len(got) != 0 {
			t.Errorf("%s with %q: found %v, want nothing", c.name, c.content, got)
		}
	}
}
