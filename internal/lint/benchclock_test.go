package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the repository root, from this package's directory.
const moduleRoot = "../.."

// benchmarkBodies returns, for every Benchmark function in the module's
// test files (the nested modules bench/peers and interop apart, which
// have their own go.mod), each body that runs on a benchmark's clock: the
// function itself unless it only calls b.Run, and every func literal
// passed to b.Run, keyed "file:Benchmark[/sub]".
func benchmarkBodies(t *testing.T) map[string]*ast.BlockStmt {
	t.Helper()
	out := map[string]*ast.BlockStmt{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != moduleRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != moduleRoot && err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil || !strings.HasPrefix(fd.Name.Name, "Benchmark") {
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
						out[rel+":"+fd.Name.Name+"/sub"+string(rune('0'+subs))] = fl.Body
					}
				}
				return true
			})
			if subs == 0 {
				out[rel+":"+fd.Name.Name] = fd.Body
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deferredCloseOnClock reports whether body defers a Close while the
// timer runs at its return: no b.StopTimer, or a b.StartTimer after the
// last one (around a pool rebuild inside the loop, say). testing stops
// the timer only once the function has returned, so the Close is timed.
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
				lastTimer = s.Sel.Name // Inspect walks in source order
			}
		}
		return true
	})
	return deferClose && lastTimer != "StopTimer"
}

// TestBenchmarksCloseOffTheClock: a benchmark that defers the Close of an
// engine or a log must stop its timer first. Close under fsync never
// syncs everything the benchmark appended and seals the active segment:
// on the clock it was most of ns/op, MB/s and B/op of short runs
// (partition AppendNeverSmall at 2000x: 6426 ns/op for a 228 ns append).
func TestBenchmarksCloseOffTheClock(t *testing.T) {
	bodies := benchmarkBodies(t)
	if len(bodies) < 20 {
		t.Fatalf("found %d benchmark bodies: is the walk rooted right?", len(bodies))
	}
	var bad []string
	for name, body := range bodies {
		if deferredCloseOnClock(body) {
			bad = append(bad, name)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("benchmarks whose deferred Close runs on the clock (no b.StopTimer after the loop): %v", bad)
	}
}
