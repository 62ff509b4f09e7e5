// Package cluster starts real Kubernetes control planes for the tests and for a first run: an API server alone
// (envtest) for integration tests, or a whole local cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with a fake node) in which Deployments really become available.
package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// modulePath is the operator's module: RepoRoot looks for the go.mod that declares it.
const modulePath = "github.com/example/webapp-operator"

var (
	rootOnce sync.Once
	rootDir  string
)

// RepoRoot is the root of the webapp-operator checkout: the directory of this package's source file when the build
// kept absolute paths, else (a -trimpath build, as make test's) the nearest directory at or above the working
// directory whose go.mod declares the operator's module; go test runs a test in its package's directory.
func RepoRoot() string {
	rootOnce.Do(func() {
		if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
			rootDir = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
			return
		}
		dir, err := os.Getwd()
		if err != nil {
			panic(fmt.Sprintf("finding the checkout's root: %v", err))
		}
		for {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module "+modulePath+"\n")) {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				panic("finding the checkout's root: no go.mod of " + modulePath + " at or above the working directory")
			}
			dir = parent
		}
	})
	return rootDir
}

var (
	toolsOnce sync.Once
	toolsDir  string
	toolsErr  error
)

// ToolsBin returns the directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
// and kwok: $WEBAPP_TOOLS_BIN when set, else the versioned cache that test/tools/install.sh fills (building
// what is missing, once; several minutes on a cold cache).
func ToolsBin() (string, error) {
	toolsOnce.Do(func() {
		if d := os.Getenv("WEBAPP_TOOLS_BIN"); d != "" {
			toolsDir = d
			return
		}
		var out, errOut bytes.Buffer
		cmd := exec.Command(filepath.Join(RepoRoot(), "test", "tools", "install.sh"))
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			toolsErr = fmt.Errorf("building the control-plane binaries (test/tools/install.sh): %w\n%s", err, errOut.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		toolsDir = lines[len(lines)-1]
	})
	return toolsDir, toolsErr
}

// EnvtestBin returns the directory with etcd, kube-apiserver and kubectl for envtest: $KUBEBUILDER_ASSETS when
// set (binaries a user already has from setup-envtest work), else ToolsBin.
func EnvtestBin() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	return ToolsBin()
}

// NeverReadyImage is an image whose pods kwok schedules but never makes ready (see kwok/pod-ready.yaml), for
// rollouts that must get stuck.
const NeverReadyImage = "never-ready.invalid/app:1"

// KwokStages are the kwok stage files (test/cluster/kwok): what kwok does to nodes and pods.
func KwokStages() []string {
	var files []string
	for _, s := range []string{"node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete"} {
		files = append(files, filepath.Join(RepoRoot(), "test", "cluster", "kwok", s+".yaml"))
	}
	return files
}

// ModuleDir is the directory, in the module cache, of module at the version the go.mod in goModDir requires. It is
// read offline: the module was downloaded for a build, and the real node's namespace reaches no proxy.
func ModuleDir(goModDir, module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = goModDir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding module %s from %s: %w", module, goModDir, err)
	}
	return strings.TrimSpace(string(out)), nil
}
