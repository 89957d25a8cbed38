package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateTopicNamesTheCharacter: the refusal of a name with a
// character outside Kafka's set used to print the character's first byte
// as a rune, so "tëst" was reported as holding 'Ã' (mojibake). It names
// the character, and a byte that is not UTF-8 as a byte.
func TestValidateTopicNamesTheCharacter(t *testing.T) {
	for name, want := range map[string]string{
		"tëst":      `"tëst": character 'ë' at byte 1`,
		"注文":        `"注文": character '注' at byte 0`,
		"bad\xffxx": `byte 0xff at 3, not UTF-8`,
	} {
		err := ValidateTopic(name)
		if !errors.Is(err, ErrInvalidTopic) {
			t.Fatalf("ValidateTopic(%q) = %v, want ErrInvalidTopic", name, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateTopic(%q) = %q, want it to contain %q", name, err, want)
		}
	}
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if _, err := e.Partition("tëst", 0); !strings.Contains(err.Error(), `"tëst"`) {
		t.Errorf("lookup error %q does not name the topic as given", err)
	}
}
