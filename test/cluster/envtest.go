package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/conversion"
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
		ControlPlaneStartTimeout: Patience(90 * time.Second),
		// kube-apiserver can take 15 s or more to exit on SIGTERM; after this it is killed.
		ControlPlaneStopTimeout: 30 * time.Second,
	}
	if installCRD {
		env.CRDDirectoryPaths = []string{filepath.Join(RepoRoot(), "manifests", "crd", "example.com_webapps.yaml")}
		env.ErrorIfCRDPathMissing = true
		// The CRD's conversion webhook is served by this process (StartConversion) on loopback over TLS, with a
		// CA envtest makes and puts in the CRD's caBundle: the API server calls it as it calls the operator's.
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{IgnoreSchemeConvertible: true, LocalServingHost: "127.0.0.1"}
	}
	etcdLog, err := logFile(logDir, "etcd.log")
	if err != nil {
		return nil, err
	}
	apiLog, err := logFile(logDir, "kube-apiserver.log")
	if err != nil {
		return nil, err
	}
	etcdPath, err := dieWithParent(logDir, filepath.Join(bin, "etcd"))
	if err != nil {
		return nil, err
	}
	apiPath, err := dieWithParent(logDir, filepath.Join(bin, "kube-apiserver"))
	if err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcdPath, Out: etcdLog, Err: etcdLog}
	api := &envtest.APIServer{Path: apiPath, Out: apiLog, Err: apiLog}
	env.ControlPlane.APIServer = api
	// On loopback the default endpoint reconciler cannot publish the apiserver's address.
	api.Configure().Set("endpoint-reconciler-type", "none")
	// Room for thousands of Services (the generative test creates one per WebApp; half are NodePort or
	// LoadBalancer): envtest's default /24 and the default node-port range run out at a few hundred.
	api.Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	api.Configure().Set("service-node-port-range", "20000-60000")
	return env, nil
}

// dieWithParent writes a wrapper that execs binary with a parent-death signal, so etcd and kube-apiserver are
// killed with the process that started them even when it dies without cleaning up (a test timeout's panic,
// Ctrl-C). envtest starts them in process groups of their own and offers no hook for this. Without setpriv
// (util-linux) the binary is used as it is.
func dieWithParent(dir, binary string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return binary, nil
	}
	wrapper := filepath.Join(dir, filepath.Base(binary)+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, binary)
	return wrapper, os.WriteFile(wrapper, []byte(script), 0o755)
}

func logFile(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log %s: %w", name, err)
	}
	return f, nil
}

// StartConversion serves the WebApp conversion webhook for env's CRD (installed with NewEnvtest's installCRD) until
// ctx ends, and returns once it answers over TLS.
func StartConversion(ctx context.Context, env *envtest.Environment) error {
	o := env.WebhookInstallOptions
	handler, err := conversion.NewHandler(controller.NewScheme())
	if err != nil {
		return err
	}
	server := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir})
	server.Register("/convert", handler)
	errs := make(chan error, 1)
	go func() { errs <- server.Start(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-errs:
			return fmt.Errorf("serving the conversion webhook: %w", err)
		default:
		}
		if server.StartedChecker()(nil) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the conversion webhook did not start within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
