package conversion

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// CRDName is the WebApp CRD's name: the conversion webhook's CA is injected into it, and the storage migration
// reads and completes its status.storedVersions.
const CRDName = "webapps.example.com"

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=webapps.example.com,verbs=update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,resourceNames=webapps.example.com,verbs=patch

// WebhookOptions configure the conversion webhook's server and its certificates.
type WebhookOptions struct {
	// Port and CertDir are the HTTPS server's (tls.crt and tls.key in CertDir, reloaded when they change).
	Port    int
	CertDir string
	// Rotate keeps a CA and serving certificate in the Secret Namespace/SecretName and the CA in the CRD's
	// conversion caBundle (cert-controller's rotator), and writes the certificate and its key into CertDir (a
	// writable directory: an emptyDir). Off, the certificate files and the caBundle come from elsewhere
	// (cert-manager's Secret mounted at CertDir, a test's own CA).
	Rotate                bool
	Namespace, SecretName string
	// ServiceName is the Service the API server calls, in Namespace: the certificate is for its DNS names and
	// ExtraDNSNames.
	ServiceName   string
	ExtraDNSNames []string
	// URL, for a manager run outside the cluster (make run), is the address at which the API server reaches this
	// process, https://HOST:PORT/convert: the server listens on PORT, with a certificate for HOST made in memory
	// (Rotate and Port are ignored), and the CRD's conversion points at URL while the webhook runs; what it pointed
	// at before is put back when it stops.
	URL string
}

// Webhook serves WebApp conversion (v1 to and from the v2 hub) at /convert on every replica, leader or
// not: conversion sits on the read path of every request for a version other than the stored one. It runs in a
// manager of its own, started before the operator's: the operator's cache lists WebApps at v2, which, while some
// are stored at v1 (during an upgrade), needs a conversion webhook to answer; in the operator's manager the
// certificates would wait for that cache, and the cache for the certificates.
type Webhook struct {
	mgr manager.Manager
	// Started is nil once the server answers over TLS with a certificate the CRD trusts: the replica's readiness.
	Started healthz.Checker
	// Ready is closed at that moment.
	Ready <-chan struct{}
}

// NewWebhook sets up the webhook, its server starting only once its certificate is in place and the CRD
// trusts its CA (with o.Rotate: cert-controller's rotator keeps both).
func NewWebhook(cfg *rest.Config, scheme *runtime.Scheme, o WebhookOptions) (*Webhook, error) {
	handler, err := NewHandler(scheme)
	if err != nil {
		return nil, err
	}
	// A local run puts the CRD's conversion back when it stops: time for that (30 s at most) before the manager
	// gives up on its runnables.
	shutdown := 30 * time.Second
	if o.URL != "" {
		shutdown = time.Minute
	}
	mgr, err := manager.New(cfg, manager.Options{
		GracefulShutdownTimeout: &shutdown,
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		// Only the rotator's own cache of the Secret and the CRD is used.
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}},
	})
	if err != nil {
		return nil, err
	}
	serverOpts := webhook.Options{Port: o.Port, CertDir: o.CertDir}
	var local *localEndpoint
	if o.URL != "" {
		if local, err = newLocalEndpoint(o.URL); err != nil {
			return nil, err
		}
		serverOpts.CertDir = local.certDir
		serverOpts.Host, serverOpts.Port = local.bindHost, local.port
	}
	server := webhook.NewServer(serverOpts)
	server.Register("/convert", handler)

	certsReady, ready := make(chan struct{}), make(chan struct{})
	switch {
	case local != nil:
		// The certificate is in place: the server starts at once, and the CRD points here once it answers.
		close(certsReady)
		if err := mgr.Add(&pointCRD{client: mgr.GetClient(), endpoint: local, started: server.StartedChecker(), pointed: ready}); err != nil {
			return nil, err
		}
	case o.Rotate:
		if o.Namespace == "" || o.SecretName == "" || o.ServiceName == "" {
			return nil, errors.New("certificate rotation needs the namespace, the Secret's and the Service's names")
		}
		host := fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
		if err := rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
			CertDir:        o.CertDir,
			CAName:         "webapp-operator-ca",
			CAOrganization: "webapp-operator",
			DNSName:        host,
			ExtraDNSNames:  append([]string{host + ".cluster.local", o.ServiceName + "." + o.Namespace}, o.ExtraDNSNames...),
			IsReady:        certsReady,
			Webhooks:       []rotator.WebhookInfo{{Name: CRDName, Type: rotator.CRDConversion}},
			FieldOwner:     webappv2.FieldManager,
			// Every replica serves conversion, so every replica needs the certificate: the Secret is written with
			// optimistic concurrency, and a replica that loses the race reads the winner's.
			RequireLeaderElection: false,
			EnableReadinessCheck:  true,
		}); err != nil {
			return nil, fmt.Errorf("setting up certificate rotation: %w", err)
		}
		// The files come from the Secret at once, instead of when the kubelet next syncs a mounted Secret (up
		// to a minute or two, during which the replica could not serve).
		if err := mgr.Add(certFiles{reader: mgr.GetAPIReader(), key: types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}, dir: o.CertDir}); err != nil {
			return nil, err
		}
	default:
		close(certsReady)
	}
	if local == nil {
		ready = certsReady
	}
	if err := mgr.Add(webhookAfterCerts{server: server, ready: certsReady}); err != nil {
		return nil, err
	}
	return &Webhook{mgr: mgr, Started: server.StartedChecker(), Ready: ready}, nil
}

// Start runs the webhook until ctx ends.
func (w *Webhook) Start(ctx context.Context) error { return w.mgr.Start(ctx) }

// webhookAfterCerts starts the webhook server once the certificates are in place (it cannot start without its
// files), on every replica.
type webhookAfterCerts struct {
	server webhook.Server
	ready  <-chan struct{}
}

func (w webhookAfterCerts) Start(ctx context.Context) error {
	select {
	case <-w.ready:
		return w.server.Start(ctx)
	case <-ctx.Done():
		return nil
	}
}

func (webhookAfterCerts) NeedLeaderElection() bool { return false }

// NewHandler is the /convert handler: WebApp v1 to and from the v2 hub, by the functions of
// convert.go and schema.go. scheme must know both versions (controller.NewScheme).
func NewHandler(scheme *runtime.Scheme) (http.Handler, error) {
	converter, err := conversion.NewHubSpokeConverter(&webappv2.WebApp{},
		conversion.NewSpokeConverter(&webappv1.WebApp{},
			func(_ context.Context, hub *webappv2.WebApp, spoke *webappv1.WebApp) error {
				return FromHub(hub, spoke)
			},
			func(_ context.Context, spoke *webappv1.WebApp, hub *webappv2.WebApp) error {
				return ToHub(spoke, hub)
			}))(scheme)
	if err != nil {
		return nil, err
	}
	registry := conversion.NewRegistry()
	if err := registry.RegisterConverter(webappv2.GroupVersion.WithKind("WebApp").GroupKind(), converter); err != nil {
		return nil, err
	}
	return conversion.NewWebhookHandler(scheme, registry), nil
}

// certFiles writes the serving certificate and key of the rotator's Secret into the webhook server's directory
// (tls.crt, tls.key; never the CA's key), on every replica: every 2 seconds until they are there, then every
// minute (a renewal happens 90 days before expiry). Each file is replaced by a rename, and only when it changed;
// the server reloads it. The Secret is read directly, not cached (the manager caches Secrets' metadata only).
type certFiles struct {
	reader client.Reader
	key    types.NamespacedName
	dir    string
}

func (c certFiles) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("webhook-certificate")
	for {
		period := time.Minute
		if err := c.sync(ctx); err != nil {
			logger.Error(err, "writing the webhook's certificate files")
			period = 2 * time.Second
		} else if _, err := os.Stat(filepath.Join(c.dir, "tls.crt")); err != nil {
			period = 2 * time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(period):
		}
	}
}

func (certFiles) NeedLeaderElection() bool { return false }

// sync writes the Secret's tls.key and tls.crt where they differ from the files (nothing while the Secret has none).
func (c certFiles) sync(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := c.reader.Get(ctx, c.key, secret); err != nil {
		return err
	}
	crt, key := secret.Data["tls.crt"], secret.Data["tls.key"]
	if len(crt) == 0 || len(key) == 0 {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	// The key first: the server reloads on a change of either, and a new certificate needs its new key.
	for _, f := range []struct {
		name string
		data []byte
	}{{"tls.key", key}, {"tls.crt", crt}} {
		path := filepath.Join(c.dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		logger := log.FromContext(ctx).WithName("webhook-certificate")
		logger.Info("wrote the webhook's certificate file", "file", path)
	}
	return nil
}
