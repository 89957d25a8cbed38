package errcode

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestCode(t *testing.T) {
	sentinel := New(CorruptMessage, "corrupt")
	wrapped := fmt.Errorf("cannot read batch at 42: %w", sentinel)
	if got := Code(wrapped); got != CorruptMessage {
		t.Fatalf("Code(wrapped) = %d, want %d", got, CorruptMessage)
	}
	if !errors.Is(wrapped, sentinel) {
		t.Fatal("errors.Is lost the sentinel through wrapping")
	}
	if got := Code(nil); got != None {
		t.Fatalf("Code(nil) = %d, want 0", got)
	}
	if got := Code(io.ErrUnexpectedEOF); got != UnknownServerError {
		t.Fatalf("Code(foreign) = %d, want -1", got)
	}
	other := New(CorruptMessage, "corrupt")
	if errors.Is(wrapped, other) {
		t.Fatal("distinct sentinels with the same code must not match")
	}
}
