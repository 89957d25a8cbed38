package fsutil

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if Exists(path) {
		t.Fatal("Exists before the write")
	}
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	if Exists(path + ".tmp") {
		t.Fatal("temporary file left behind")
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestReadFileMax(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFileMax(path, 5); err != nil || string(got) != "12345" {
		t.Fatalf("ReadFileMax(5) = %q, %v", got, err)
	}
	if _, err := ReadFileMax(path, 4); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("ReadFileMax(4) of 5 bytes: %v, want ErrFileTooLarge", err)
	}
	if _, err := ReadFileMax(filepath.Join(dir, "none"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	// A file longer than the first read's buffer is read whole.
	long := bytes.Repeat([]byte("0123456789"), 300)
	if err := os.WriteFile(path, long, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFileMax(path, 3000); err != nil || !bytes.Equal(got, long) {
		t.Fatalf("ReadFileMax(3000) of 3000 bytes: %d bytes, %v", len(got), err)
	}
	if _, err := ReadFileMax(path, 2999); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("ReadFileMax(2999) of 3000 bytes: %v, want ErrFileTooLarge", err)
	}
	// A sparse file is refused after max+1 bytes, not read whole.
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadFileMax(big, 4096); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("1 TiB sparse file: %v, want ErrFileTooLarge", err)
	}
}

// TestMkdirAllDurable: every directory created is synced into its parent,
// top down, and the parent of one that already existed is synced again.
func TestMkdirAllDurable(t *testing.T) {
	base := t.TempDir()
	var synced []string
	stop := ObserveDirSyncs(func(dir string) { synced = append(synced, dir) })
	defer stop()
	leaf := filepath.Join(base, "a", "b", "c")
	if err := MkdirAllDurable(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{base, filepath.Join(base, "a"), filepath.Join(base, "a", "b")}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %q, want %q", synced, want)
	}
	if st, err := os.Stat(leaf); err != nil || !st.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	synced = nil
	if err := MkdirAllDurable(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(base, "a", "b")}; !slices.Equal(synced, want) {
		t.Fatalf("existing dir: synced %q, want %q", synced, want)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(filepath.Join(file, "x"), 0o755); err == nil {
		t.Fatal("created a directory under a file")
	}
}
