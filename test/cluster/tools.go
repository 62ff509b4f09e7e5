package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Tool is the path of a command built from the tools module (test/tools: helm, kustomize, promtool, ...): built
// once per go.sum and Go version into the cache outside the checkout ($WEBAPP_TOOLS_CACHE, default
// ~/.cache/webapp-operator/tools), reused after. It is built as every build of make test is (CGO_ENABLED=0,
// -trimpath), so the packages it shares with the others are compiled once. Concurrent callers may both build; the
// last rename wins, and both binaries are the same.
func Tool(pkg string, tags ...string) (string, error) {
	dir := filepath.Join(RepoRoot(), "test", "tools")
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(sum)
	_, _ = fmt.Fprint(h, runtime.Version(), tags)
	out := filepath.Join(cacheDir(), "tools", "tools-"+hex.EncodeToString(h.Sum(nil))[:12], filepath.Base(pkg))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	args := []string{"build", "-trimpath", "-o", tmp}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in test/tools: %w\n%s", pkg, err, b)
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
	bin, err := Tool("helm.sh/helm/v4/cmd/helm")
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
