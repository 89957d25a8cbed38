package sink

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Placeholder is how a database/sql driver numbers query parameters.
type Placeholder int

const (
	// QuestionMark writes parameters as ? (SQLite, MySQL, most drivers).
	QuestionMark Placeholder = iota
	// Dollar writes them as $1, $2, ... (PostgreSQL's pq and pgx).
	Dollar
)

// DefaultTable is the positions table's name unless SQLOptions says
// otherwise.
const DefaultTable = "sink_positions"

// SQLOptions configures an SQLStore.
type SQLOptions struct {
	// Table is the positions table, created if missing: a name or
	// schema.name of letters, digits and underscores (DefaultTable).
	Table string
	// Placeholder is the driver's parameter style (QuestionMark).
	Placeholder Placeholder
	// TxOptions are passed to BeginTx (nil: the driver's default
	// isolation, enough since the position update is conditional).
	TxOptions *sql.TxOptions
}

// tableName is what SQLOptions.Table accepts: it goes into the SQL text,
// so it must be an identifier, never arbitrary text.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// SQLStore is a Store in a database reached through database/sql, with a
// driver whose transactions are real (atomic and isolated). Positions live
// in one table, keyed by (consumer_group, topic, partition_id); the SQL is
// plain enough for SQLite, PostgreSQL and MySQL.
type SQLStore struct {
	db     *sql.DB
	table  string
	txOpts *sql.TxOptions

	selectQuery string
	insert      *sql.Stmt
	update      *sql.Stmt
}

// NewSQLStore creates the positions table if it is missing and prepares
// the store's statements. A table name that is not an identifier gives
// ErrInvalidConfig.
func NewSQLStore(ctx context.Context, db *sql.DB, opts SQLOptions) (*SQLStore, error) {
	table := opts.Table
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("cannot use table %q: not an identifier: %w", table, ErrInvalidConfig)
	}
	if opts.Placeholder != QuestionMark && opts.Placeholder != Dollar {
		return nil, fmt.Errorf("cannot use placeholder style %d: %w", opts.Placeholder, ErrInvalidConfig)
	}
	if db == nil {
		return nil, fmt.Errorf("cannot use a nil database: %w", ErrInvalidConfig)
	}
	q := positionQueries(table, opts.Placeholder)
	if _, err := db.ExecContext(ctx, q.create); err != nil {
		return nil, fmt.Errorf("cannot create table %s: %w", table, err)
	}
	s := &SQLStore{db: db, table: table, txOpts: opts.TxOptions, selectQuery: q.selectGroup}
	var err error
	if s.insert, err = db.PrepareContext(ctx, q.insert); err != nil {
		return nil, fmt.Errorf("cannot prepare position insert: %w", err)
	}
	if s.update, err = db.PrepareContext(ctx, q.update); err != nil {
		s.insert.Close()
		return nil, fmt.Errorf("cannot prepare position update: %w", err)
	}
	return s, nil
}

// queries is the SQL text of an SQLStore.
type queries struct {
	create, selectGroup, insert, update string
}

// positionQueries writes the store's SQL for table and a placeholder
// style. The column names avoid SQL's reserved words (GROUP, PARTITION).
func positionQueries(table string, ph Placeholder) queries {
	arg := func(i int) string {
		if ph == Dollar {
			return "$" + strconv.Itoa(i)
		}
		return "?"
	}
	args := func(from, n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = arg(from + i)
		}
		return strings.Join(s, ", ")
	}
	return queries{
		create: "CREATE TABLE IF NOT EXISTS " + table + " (" +
			"consumer_group VARCHAR(255) NOT NULL, " +
			"topic VARCHAR(255) NOT NULL, " +
			"partition_id INTEGER NOT NULL, " +
			"next_offset BIGINT NOT NULL, " +
			"PRIMARY KEY (consumer_group, topic, partition_id))",
		selectGroup: "SELECT topic, partition_id, next_offset FROM " + table + " WHERE consumer_group = " + arg(1),
		insert:      "INSERT INTO " + table + " (consumer_group, topic, partition_id, next_offset) VALUES (" + args(1, 4) + ")",
		update: "UPDATE " + table + " SET next_offset = " + arg(1) +
			" WHERE consumer_group = " + arg(2) + " AND topic = " + arg(3) +
			" AND partition_id = " + arg(4) + " AND next_offset = " + arg(5),
	}
}

// DB returns the store's database.
func (s *SQLStore) DB() *sql.DB { return s.db }

// Close releases the prepared statements (not the database).
func (s *SQLStore) Close() error {
	err1 := s.insert.Close()
	err2 := s.update.Close()
	if err1 != nil {
		return err1
	}
	return err2
}

// Positions implements Store.
func (s *SQLStore) Positions(ctx context.Context, group string) (map[TopicPartition]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.selectQuery, group)
	if err != nil {
		return nil, fmt.Errorf("cannot query %s: %w", s.table, err)
	}
	defer rows.Close()
	out := map[TopicPartition]int64{}
	for rows.Next() {
		var tp TopicPartition
		var next int64
		if err := rows.Scan(&tp.Topic, &tp.Partition, &next); err != nil {
			return nil, fmt.Errorf("cannot scan a row of %s: %w", s.table, err)
		}
		out[tp] = next
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", s.table, err)
	}
	return out, nil
}

// Begin implements Store.
func (s *SQLStore) Begin(ctx context.Context) (*SQLTx, error) {
	tx, err := s.db.BeginTx(ctx, s.txOpts)
	if err != nil {
		return nil, err
	}
	return &SQLTx{Tx: tx, store: s}, nil
}

// SQLTx is an SQLStore's transaction: the handler writes through the
// embedded *sql.Tx (ExecContext, QueryContext, StmtContext, ...), and must
// neither commit nor roll it back itself.
type SQLTx struct {
	*sql.Tx
	store *SQLStore
}

// SetPosition implements Tx: an insert when no position is stored (a
// concurrent insert fails on the primary key), otherwise an update
// conditional on the stored offset being prev (a concurrent sink's update
// leaves no row to match: ErrPositionConflict).
func (t *SQLTx) SetPosition(ctx context.Context, group string, tp TopicPartition, prev, next int64) error {
	if prev < 0 {
		if _, err := t.StmtContext(ctx, t.store.insert).ExecContext(ctx, group, tp.Topic, tp.Partition, next); err != nil {
			return fmt.Errorf("cannot insert into %s: %w", t.store.table, err)
		}
		return nil
	}
	res, err := t.StmtContext(ctx, t.store.update).ExecContext(ctx, next, group, tp.Topic, tp.Partition, prev)
	if err != nil {
		return fmt.Errorf("cannot update %s: %w", t.store.table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("cannot count rows updated in %s: %w", t.store.table, err)
	}
	if n != 1 {
		return fmt.Errorf("cannot move position of %s-%d from %d: %w", tp.Topic, tp.Partition, prev, ErrPositionConflict)
	}
	return nil
}
