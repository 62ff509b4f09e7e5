package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// NewEnvtest configures (does not start) an etcd and kube-apiserver on free loopback ports, with the WebApp CRD
// installed on start when installCRD is set. The processes' output goes to files in logDir.
func NewEnvtest(logDir string, installCRD bool) (*envtest.Environment, error) {
	bin, err := EnvtestBin()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 90 * time.Second,
		// kube-apiserver can take 15 s or more to exit on SIGTERM; after this it is killed.
		ControlPlaneStopTimeout: 30 * time.Second,
	}
	if installCRD {
		env.CRDDirectoryPaths = []string{filepath.Join(RepoRoot(), "manifests", "crd")}
		env.ErrorIfCRDPathMissing = true
	}
	etcdLog, err := logFile(logDir, "etcd.log")
	if err != nil {
		return nil, err
	}
	apiLog, err := logFile(logDir, "kube-apiserver.log")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	api := &envtest.APIServer{Out: apiLog, Err: apiLog}
	env.ControlPlane.APIServer = api
	// On loopback the default endpoint reconciler cannot publish the apiserver's address.
	api.Configure().Set("endpoint-reconciler-type", "none")
	return env, nil
}

func logFile(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log %s: %w", name, err)
	}
	return f, nil
}
