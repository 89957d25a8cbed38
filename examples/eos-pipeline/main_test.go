package main

import (
	"os"
	"testing"
)

func TestPipeline(t *testing.T) {
	if err := run(t.TempDir(), 300, os.Stdout); err != nil {
		t.Fatal(err)
	}
}
