package nobuild

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The suites' go command lets an up-to-date build through (make run finding bin/manager current), and fails one
// that compiles or links, and any go run, with the words that say what to do.
func TestNoBuildShimRefusesOnlyACompile(t *testing.T) {
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	shim, err := filepath.Abs("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("main.go", "package main\n\nfunc main() {}\n")
	goCmd := func(bin string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "WEBAPP_REAL_GO="+realGo, "GOFLAGS=-trimpath", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Built before, as make test's build phase builds bin/manager.
	if out, err := goCmd(realGo, "build", "-o", "m", "."); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name   string
		change string // main.go's new text, if any
		args   []string
		want   int
	}{
		{name: "an up-to-date build", args: []string{"build", "-o", "m", "."}, want: 0},
		{name: "go list", args: []string{"list", "-f", "{{.Name}}", "."}, want: 0},
		{name: "a build of a changed package", change: "package main\n\nfunc main() { println() }\n", args: []string{"build", "-o", "m", "."}, want: 97},
		{name: "a build into another file", args: []string{"build", "-o", "other", "."}, want: 97},
		{name: "go run", args: []string{"run", "."}, want: 97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.change != "" {
				write("main.go", tc.change)
			}
			out, err := goCmd(shim, tc.args...)
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Fatalf("go %s through the shim exited %d, want %d:\n%s", strings.Join(tc.args, " "), code, tc.want, out)
			}
			if tc.want == 97 && !strings.Contains(out, "build phase of hack/test.sh") {
				t.Errorf("the refusal does not say what to do:\n%s", out)
			}
		})
	}
}
