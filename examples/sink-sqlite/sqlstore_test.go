package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/sink"
)

// TestSQLStoreOnSQLite runs sink.SQLStore against a real database: the
// table is created once (a second store on it reuses it), positions
// are read back per group, a stale update is refused with
// ErrPositionConflict, a second insert of a new position fails on the
// primary key, and a rollback keeps nothing.
func TestSQLStoreOnSQLite(t *testing.T) {
	ctx := context.Background()
	db, err := openDB(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, ph := range []sink.Placeholder{sink.QuestionMark, sink.Dollar} {
		store, err := sink.NewSQLStore(ctx, db, sink.SQLOptions{Table: "positions", Placeholder: ph})
		if err != nil {
			t.Fatal(err)
		}
		group := "g" + string(rune('0'+ph))
		tp := sink.TopicPartition{Topic: "t", Partition: 2}
		set := func(prev, next int64) error {
			tx, err := store.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.SetPosition(ctx, group, tp, prev, next); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		}
		if err := set(-1, 10); err != nil {
			t.Fatal(err)
		}
		if err := set(10, 25); err != nil {
			t.Fatal(err)
		}
		if err := set(10, 30); !errors.Is(err, sink.ErrPositionConflict) {
			t.Fatalf("placeholder %d: stale update: %v, want ErrPositionConflict", ph, err)
		}
		if err := set(-1, 40); err == nil {
			t.Fatalf("placeholder %d: second insert of a stored position succeeded", ph)
		}
		tx, _ := store.Begin(ctx)
		if err := tx.SetPosition(ctx, group, tp, 25, 99); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		pos, err := store.Positions(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if len(pos) != 1 || pos[tp] != 25 {
			t.Fatalf("placeholder %d: positions %v, want t-2 at 25", ph, pos)
		}
		if other, _ := store.Positions(ctx, "other"); len(other) != 0 {
			t.Fatalf("another group's positions: %v", other)
		}
		store.Close()
	}
}
