package testutil

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// updateGolden rewrites golden outputs (go test ... -args -update).
var updateGolden = flag.Bool("update", false, "rewrite the golden outputs (testdata/*/*.golden)")

// volatile are the parts of kubectl-webapp's output that differ from run to run: times, addresses, names the
// API server or a controller makes up, the test's namespace, revisions of pod templates, a pause's time left.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "<time>"},
	{regexp.MustCompile(`ClusterIP \d+\.\d+\.\d+\.\d+`), "ClusterIP <ip>"},
	{regexp.MustCompile(`it-[a-z0-9]{6}`), "<namespace>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uid>"},
	{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "<revision>"},
	{regexp.MustCompile(`-[0-9a-f]{8,10}-[a-z0-9]{5}\b`), "-<pod>"},
	{regexp.MustCompile(`time=\d+(\.\d+)?`), "time=<unix>"},
	{regexp.MustCompile(`ends in (\d+h)?(\d+m)?\d+s\b`), "ends in <duration>"},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?s (left|ago)\b`), "<duration> $4"},
}

// Normalized is s with its volatile parts replaced.
func Normalized(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// Golden compares got, its volatile parts replaced, with testdata/plugin/name.golden (rewritten with -update),
// and checks that the repository's docs/kubectl-webapp.md shows it (with the volatile parts anywhere), so the page
// cannot rot.
func Golden(t *testing.T, repoRoot, name, got string) {
	t.Helper()
	output := got
	got = Normalized(got)
	docs, err := os.ReadFile(filepath.Join(repoRoot, "docs", "kubectl-webapp.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(Normalized(string(docs)), got) {
		t.Errorf("docs/kubectl-webapp.md does not show this output of kubectl webapp (%s):\n%s", name, got)
	}
	path := filepath.Join("testdata", "plugin", name+".golden")
	if *updateGolden {
		// The output as it was, for docs/kubectl-webapp.md (which shows real output).
		raw := filepath.Join(os.TempDir(), "kubectl-webapp-golden", name+".txt")
		if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(raw, []byte(output), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("kubectl webapp output differs from %s (run with -update to accept it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// GoldenEventually is Golden over what produce returns once it equals the golden file, read again until timeout:
// for output over a cluster whose controllers are still catching up (a PodDisruptionBudget's count, a pod still
// terminating). With -update it takes the first output (the caller has waited for what it shows).
func GoldenEventually(t *testing.T, repoRoot, name string, timeout time.Duration, produce func() (string, error)) {
	t.Helper()
	var got string
	if !*updateGolden {
		want, _ := os.ReadFile(filepath.Join("testdata", "plugin", name+".golden"))
		deadline := time.Now().Add(timeout)
		for {
			out, err := produce()
			if err != nil {
				t.Fatal(err)
			}
			got = out
			if Normalized(got) == string(want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
	} else {
		out, err := produce()
		if err != nil {
			t.Fatal(err)
		}
		got = out
	}
	Golden(t, repoRoot, name, got)
}
