// Package readmecheck keeps the README's Go code compiling: every ```go
// block of README.md is a whole program, and the test builds each one
// against the module as it is.
package readmecheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the contents of the README's ```go fenced blocks.
func goBlocks(readme string) []string {
	var blocks []string
	for rest := readme; ; {
		i := strings.Index(rest, "\n```go\n")
		if i < 0 {
			return blocks
		}
		rest = rest[i+len("\n```go\n"):]
		j := strings.Index(rest, "\n```\n")
		if j < 0 {
			return append(blocks, rest)
		}
		blocks = append(blocks, rest[:j+1])
		rest = rest[j:]
	}
}

// TestREADMEGoBlocksCompile builds each Go block of README.md as package
// main inside the module (through go build's -overlay, so nothing is
// written to the tree): a snippet that lost an import, uses an undeclared
// variable or calls an API that changed fails here, not in a reader's
// editor.
func TestREADMEGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	tmp := t.TempDir()
	for i, src := range blocks {
		if !strings.HasPrefix(src, "package main\n") {
			t.Errorf("README Go block %d is not a whole program (package main, imports, func main):\n%s", i+1, src)
			continue
		}
		file := filepath.Join(tmp, "main.go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		// A directory of the module that does not exist on disk: the
		// overlay gives it its one file.
		pkg := filepath.Join(root, "internal", "readmecheck", "block")
		overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "main.go"): file}})
		overlayFile := filepath.Join(tmp, "overlay.json")
		if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goCmd, "build", "-overlay", overlayFile, "-o", os.DevNull, "./internal/readmecheck/block")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README Go block %d does not compile: %v\n%s\n%s", i+1, err, out, src)
		}
	}
}
