package partition

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// timedBodies returns, for every Benchmark in file, each function that
// runs on a benchmark's clock: the Benchmark itself unless it only calls
// b.Run, and every func literal passed to b.Run (named by the benchmark).
func timedBodies(t *testing.T, file string) map[string]*ast.BlockStmt {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ast.BlockStmt{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || len(fd.Name.Name) < 9 || fd.Name.Name[:9] != "Benchmark" {
			continue
		}
		subs := 0
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Run" && len(c.Args) == 2 {
				if fl, ok := c.Args[1].(*ast.FuncLit); ok {
					subs++
					out[fd.Name.Name+"/sub"] = fl.Body
				}
			}
			return true
		})
		if subs == 0 {
			out[fd.Name.Name] = fd.Body
		}
	}
	return out
}

// deferredCloseOnClock reports whether body defers a Close while the
// timer is running when it returns: no b.StopTimer, or a b.StartTimer
// after the last one (as around a pool rebuild inside the loop). testing
// stops the timer only after the function returns, so the Close is timed.
func deferredCloseOnClock(body *ast.BlockStmt) bool {
	deferClose, lastTimer := false, ""
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // goroutines' and nested subs' bodies
		case *ast.DeferStmt:
			if s, ok := n.Call.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Close" {
				deferClose = true
			}
		case *ast.CallExpr:
			if s, ok := n.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "StopTimer" || s.Sel.Name == "StartTimer") {
				lastTimer = s.Sel.Name // source order: Inspect walks it
			}
		}
		return true
	})
	return deferClose && lastTimer != "StopTimer"
}

// Log.Close under SyncNever syncs what the benchmark appended and seals
// the active segment; deferred without b.StopTimer it runs on the clock.
// `go test ./partition -run XXX -bench 'AppendNeverSmall$' -benchtime
// 2000x`: 6426 ns/op (14.8 MB/s) for a 100-byte append that takes 228
// ns/op at 200000x: ~12.5 ms of Close in every run's ns/op, MB/s, B/op.
func TestReview15PartitionBenchmarksCloseOffTheClock(t *testing.T) {
	var bad []string
	for name, body := range timedBodies(t, "log_timing_test.go") {
		if deferredCloseOnClock(body) {
			bad = append(bad, name)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("benchmarks whose deferred Log.Close runs on the clock (no b.StopTimer): %v", bad)
	}
}
