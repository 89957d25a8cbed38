package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestPositionQueriesPlaceholders(t *testing.T) {
	t.Parallel()
	q := positionQueries("sink_positions", Dollar)
	if !strings.HasSuffix(q.update, "next_offset = $1 WHERE consumer_group = $2 AND topic = $3 AND partition_id = $4 AND next_offset = $5") {
		t.Fatalf("update with $n placeholders: %s", q.update)
	}
	if !strings.HasSuffix(q.insert, "VALUES ($1, $2, $3, $4)") || !strings.HasSuffix(q.selectGroup, "consumer_group = $1") {
		t.Fatalf("insert %q, select %q", q.insert, q.selectGroup)
	}
	q = positionQueries("app.positions", QuestionMark)
	if strings.Contains(q.update+q.insert+q.selectGroup, "$") || strings.Count(q.update, "?") != 5 || strings.Count(q.insert, "?") != 4 {
		t.Fatalf("queries with ? placeholders: %+v", q)
	}
	if !strings.HasPrefix(q.create, "CREATE TABLE IF NOT EXISTS app.positions (") {
		t.Fatalf("create: %s", q.create)
	}
}

func TestNewSQLStoreRejectsBadConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, opts := range []SQLOptions{
		{Table: "positions; DROP TABLE accounts"},
		{Table: "1positions"},
		{Table: "a.b.c"},
		{Placeholder: 7},
		{}, // a nil database
	} {
		if _, err := NewSQLStore(ctx, nil, opts); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("options %+v: %v, want ErrInvalidConfig", opts, err)
		}
	}
}
