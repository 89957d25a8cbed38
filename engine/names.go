package engine

import (
	"fmt"

	"github.com/idemlog/idemlog/errcode"
)

// ErrInvalidTopic: a topic name outside Kafka's rules.
var ErrInvalidTopic = errcode.New(errcode.InvalidTopicException, "invalid topic name")

// ErrUnknownTopicOrPartition: no such topic or partition.
var ErrUnknownTopicOrPartition = errcode.New(errcode.UnknownTopicOrPartition, "unknown topic or partition")

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
			return fmt.Errorf("cannot use topic %q: byte %q at %d: %w", name, c, i, ErrInvalidTopic)
		}
	}
	return nil
}
