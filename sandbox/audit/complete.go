package audit

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// counted is the condition on runs of the rows that List and Stats count:
// those in the chain and those still unfinished (in the chain once they
// end). A finished row without a seq was not linked by nsbox; Verify
// reports it.
const counted = `(runs.seq IS NOT NULL OR runs.status = 'unfinished')`

// checkComplete finds what walking the chain cannot see (package doc,
// "Hash chain"): side-table rows of no chained run, and a schema other
// than the one the migrations build. It returns nil when there is none.
func checkComplete(ctx context.Context, q querier) (*Break, error) {
	if b, err := checkSchema(ctx, q); b != nil || err != nil {
		return b, err
	}
	// Violations and connections are written by Finish, in the
	// transaction that links the row; labels by Begin as well.
	for _, t := range []struct{ table, what, runs string }{
		{"run_violations", "violation", `seq IS NOT NULL`},
		{"run_connections", "connection", `seq IS NOT NULL`},
		{"run_labels", "label", `seq IS NOT NULL OR status = 'unfinished'`},
	} {
		var id string
		err := q.QueryRowContext(ctx, `SELECT run_id FROM `+t.table+
			` WHERE run_id NOT IN (SELECT id FROM runs WHERE `+t.runs+`) LIMIT 1`).Scan(&id)
		if err == nil {
			return &Break{ID: id, Reason: fmt.Sprintf("a %s row of run %s, which is not in the chain: it was added, or its run removed, outside nsbox", t.what, id)}, nil
		}
		if !isNoRows(err) {
			return nil, fmt.Errorf("look for %s rows outside the chain: %w", t.what, err)
		}
	}
	return nil, nil
}

// checkSchema compares the database's recorded versions and its tables
// and indexes with what the migrations build.
func checkSchema(ctx context.Context, q querier) (*Break, error) {
	var versions []int
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_version ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read schema versions: %w", err)
		}
		versions = append(versions, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	want := make([]int, SchemaVersion)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(versions, want) {
		return &Break{Reason: fmt.Sprintf("schema_version lists versions %v where 1..%d was expected: the version table was edited", versions, SchemaVersion)}, nil
	}
	got, err := schemaObjects(ctx, q)
	if err != nil {
		return nil, err
	}
	expected, err := builtSchema()
	if err != nil {
		return nil, err
	}
	for name, sql := range expected {
		if g, ok := got[name]; !ok {
			return &Break{Reason: fmt.Sprintf("%s is missing from the schema: it was dropped outside nsbox", name)}, nil
		} else if g != sql {
			return &Break{Reason: fmt.Sprintf("%s differs from the schema nsbox made: it was altered outside nsbox", name)}, nil
		}
	}
	for name := range got {
		if _, ok := expected[name]; !ok {
			return &Break{Reason: fmt.Sprintf("%s is not part of the schema nsbox made: it was added outside nsbox (a trigger or view can change what is read)", name)}, nil
		}
	}
	return nil, nil
}

// schemaObjects maps "TYPE NAME" to the SQL of each table, index,
// trigger and view, SQLite's own objects aside.
func schemaObjects(ctx context.Context, q querier) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, coalesce(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var typ, name, sql string
		if err := rows.Scan(&typ, &name, &sql); err != nil {
			return nil, fmt.Errorf("read the schema: %w", err)
		}
		out[typ+" "+name] = strings.TrimSpace(sql)
	}
	return out, rows.Err()
}

// builtSchema is the schema the migrations build, read from a database
// in memory that ran them, once per process.
var builtSchema = sync.OnceValues(func() (map[string]string, error) {
	db, err := sql.Open("sqlite3", "file::memory:?mode=memory")
	if err != nil {
		return nil, fmt.Errorf("build the reference schema: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("build the reference schema: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, createVersionTable); err != nil {
		return nil, fmt.Errorf("build the reference schema: %w", err)
	}
	for i, m := range migrations {
		if _, err := conn.ExecContext(ctx, m); err != nil {
			return nil, fmt.Errorf("build the reference schema, step %d: %w", i+1, err)
		}
	}
	return schemaObjects(ctx, conn)
})
