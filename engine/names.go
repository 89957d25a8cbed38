package engine

import (
	"fmt"
	"unicode/utf8"
)

// maxTopicLength is Kafka's limit. Partition directories are
// "<topic>-<partition>", so the rule is what keeps every input inside the
// data directory: no separator, no "." or "..", nothing else.
const maxTopicLength = 249

// ValidateTopic applies Kafka's topic-name rules: 1..249 bytes of
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopic(name string) error {
	if name == "" || len(name) > maxTopicLength || name == "." || name == ".." {
		return fmt.Errorf("cannot use topic %q: %w", name, ErrInvalidTopic)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			// The character, not the byte: a byte of a multi-byte UTF-8
			// sequence printed as a rune is another character (mojibake).
			if r, size := utf8.DecodeRuneInString(name[i:]); r != utf8.RuneError || size > 1 {
				return fmt.Errorf("cannot use topic %q: character %q at byte %d: %w", name, r, i, ErrInvalidTopic)
			}
			return fmt.Errorf("cannot use topic %q: byte 0x%02x at %d, not UTF-8: %w", name, c, i, ErrInvalidTopic)
		}
	}
	return nil
}
