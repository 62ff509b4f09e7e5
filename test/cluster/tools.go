package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// ToolCommand is a command of the tools module (test/tools) that a suite runs: its package and build tags.
type ToolCommand struct {
	Pkg  string
	Tags []string
}

// Name is the command's name, as go build names its binary: the package path's last element, or the one before a
// major version suffix (sigs.k8s.io/kustomize/kustomize/v5 is kustomize).
func (c ToolCommand) Name() string {
	name := path.Base(c.Pkg)
	if len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		return path.Base(path.Dir(c.Pkg))
	}
	return name
}

// The tools module's commands the suites run, declared once: make test builds each of them (test/cmd/tools) before
// the suites that run them start, and the suites find them built.
var (
	HelmCommand      = ToolCommand{Pkg: "helm.sh/helm/v4/cmd/helm"}
	KustomizeCommand = ToolCommand{Pkg: "sigs.k8s.io/kustomize/kustomize/v5"}
	// promtool with only the service discovery the alert rules' tests need.
	PromtoolCommand = ToolCommand{Pkg: "github.com/prometheus/prometheus/cmd/promtool", Tags: []string{"remove_all_sd", "enable_kubernetes_sd"}}
	SuiteTools      = []ToolCommand{HelmCommand, KustomizeCommand, PromtoolCommand}
)

// EnvNoBuild names the variable that, when "1", says that everything the suites run was built before their clocks started (make test's
// build phases): a tool not in the cache then is an error naming the build to add, never a compile inside a
// test's wait.
const EnvNoBuild = "WEBAPP_NO_BUILD"

// Tool is the path of a command built from the tools module (test/tools: helm, kustomize, promtool, ...): built
// once per go.sum and Go version into the cache outside the checkout ($WEBAPP_TOOLS_CACHE, default
// ~/.cache/webapp-operator/tools), reused after. It is built as every build of make test is (CGO_ENABLED=0,
// -trimpath), so the packages it shares with the others are compiled once. Concurrent callers may both build; the
// last rename wins, and both binaries are the same.
func Tool(c ToolCommand) (string, error) {
	dir := filepath.Join(RepoRoot(), "test", "tools")
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(sum)
	_, _ = fmt.Fprint(h, runtime.Version(), c.Tags)
	out := filepath.Join(cacheDir(), "tools", "tools-"+hex.EncodeToString(h.Sum(nil))[:12], filepath.Base(c.Pkg))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if os.Getenv(EnvNoBuild) == "1" {
		return "", fmt.Errorf("%s is not built, and %s=1 says a suite builds nothing: add it to cluster.SuiteTools, which make test builds before the suites (go run ./test/cmd/tools)", c.Pkg, EnvNoBuild)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	args := []string{"build", "-trimpath", "-o", tmp}
	if len(c.Tags) > 0 {
		args = append(args, "-tags", strings.Join(c.Tags, ","))
	}
	cmd := exec.Command("go", append(args, c.Pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in test/tools: %w\n%s", c.Pkg, err, b)
	}
	return out, os.Rename(tmp, out)
}

// cacheDir is the cache outside the checkout: $WEBAPP_TOOLS_CACHE, else ~/.cache/webapp-operator.
func cacheDir() string {
	if d := os.Getenv("WEBAPP_TOOLS_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "webapp-operator")
	}
	return filepath.Join(os.TempDir(), "webapp-operator-cache")
}

// ChartDir is the Helm chart's directory.
func ChartDir() string {
	return filepath.Join(RepoRoot(), "manifests", "chart", "webapp-operator")
}

// Helm runs helm (built by Tool) with its configuration, cache and data in home, and env added; it returns stdout,
// or an error carrying the command and stderr.
func Helm(home string, env []string, args ...string) (string, error) {
	bin, err := Tool(HelmCommand)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data"), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// EnvManager names the manager binary a suite runs: make test sets it to bin/manager, which `make build` built
// before the suites started.
const EnvManager = "WEBAPP_MANAGER"

// Manager is the manager binary as the Dockerfile builds it (its build tags): $WEBAPP_MANAGER when set, else built
// into dir now (a suite run alone with go test, whose compile is before its tests' clocks).
func Manager(dir string) (string, error) {
	if bin := os.Getenv(EnvManager); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("the manager binary of %s: %w", EnvManager, err)
		}
		return bin, nil
	}
	if os.Getenv(EnvNoBuild) == "1" {
		return "", fmt.Errorf("%s=1 says a suite builds nothing, and %s names no manager binary", EnvNoBuild, EnvManager)
	}
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-tags=fieldsv1string", "-o", bin, ".")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %w\n%s", err, out)
	}
	return bin, nil
}
