// Command webapp-operator runs the WebApp controller manager.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/controller/metricsauth"
	"github.com/example/webapp-operator/conversion"
)

// Defaults of the client and worker flags, chosen by `make bench-scale` (see docs/scale.md).
const (
	DefaultMaxConcurrentReconciles = 8
	DefaultKubeAPIQPS              = 200
	DefaultKubeAPIBurst            = 400
	// DefaultGOGC is the garbage collector's target when the GOGC variable is not set. The manager's live heap is
	// small (mostly its cache: about 20 KiB per WebApp), so a tight target keeps its peak memory low (91 MiB at
	// Go's default of 100, 66 at 25, 61 at 15 for a cold start of 1,000 WebApps) for some more collector CPU
	// while it converges many at once (none measurable against the cluster's time); see docs/scale.md.
	DefaultGOGC = 15
)

// options are the manager's command-line flags (--kubeconfig and the zap flags are registered by their packages).
type options struct {
	metricsAddr, probeAddr  string
	pprofAddr               string
	metricsSecure           bool
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	requeueAfter            time.Duration
	maxConcurrentReconciles int
	namespace               string
	kubeAPIQPS              float64
	kubeAPIBurst            int
	kubeAPICompression      bool
	webhook                 conversion.WebhookOptions
	webhookDNSNames         string
	migrateStorage          bool
	migrateStorageSet       bool // given on the command line (its default is off with --namespace)
}

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGOGC)
	}
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve /metrics over HTTPS to clients the API server authenticates and authorizes (TokenReview, SubjectAccessReview) for GET /metrics. The in-cluster manifests turn it on.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints, for profiling (default: off; they are unauthenticated, so bind them to localhost).")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader with a Lease, so only one of several replicas writes.")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod's own namespace; required out of cluster).")
	flag.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits before it may take over the Lease.")
	flag.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew the Lease before it gives up leading.")
	flag.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader-election clients retry.")
	flag.DurationVar(&o.requeueAfter, "requeue-after", controller.DefaultRequeueAfter, "Period of the resync of a converged WebApp (it sends no write when nothing drifted).")
	flag.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", DefaultMaxConcurrentReconciles, "How many WebApps are reconciled at once.")
	flag.Float64Var(&o.kubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "Client-side limit of requests per second to the API server, averaged (events apart); a negative value disables the client-side limit and leaves the protection to the server's API Priority and Fairness.")
	flag.IntVar(&o.kubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "Client-side burst of requests to the API server above --kube-api-qps.")
	flag.BoolVar(&o.kubeAPICompression, "kube-api-compression", false, "Ask the API server to gzip its responses, watch streams included. Off by default: in a cluster the link is fast, and the API server compresses each event of a watch for each watcher (uncached), CPU spent on both sides for nothing; turn it on for a manager far from its API server (a slow link).")
	flag.StringVar(&o.namespace, "namespace", "", "Watch WebApps in these namespaces only, comma-separated (default: all namespaces). Then the operator reads and writes WebApps and their children only there (besides its own namespace's Lease and webhook Secret, and the CRD), so Roles are all the RBAC it needs besides the CRD's, and --migrate-storage is off (it rewrites the WebApps of every namespace).")
	flag.IntVar(&o.webhook.Port, "webhook-port", 9443, "Port of the conversion webhook's HTTPS server (every replica serves it); 0: serve none (conversion is served elsewhere).")
	flag.StringVar(&o.webhook.CertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory of the conversion webhook's tls.crt and tls.key (the certificate Secret mounted there; reloaded when it changes).")
	flag.BoolVar(&o.webhook.Rotate, "cert-rotation", true, "Keep the conversion webhook's CA and certificate in --webhook-secret-name and the CA in the CRD's caBundle, renewing them 90 days before expiry. Off: they come from elsewhere (cert-manager).")
	flag.StringVar(&o.webhook.SecretName, "webhook-secret-name", "webapp-operator-webhook-cert", "Secret, in the operator's namespace, of the conversion webhook's certificate.")
	flag.StringVar(&o.webhook.ServiceName, "webhook-service-name", "webapp-operator-webhook", "Service, in the operator's namespace, through which the API server calls the conversion webhook (the certificate names it).")
	flag.StringVar(&o.webhookDNSNames, "webhook-dns-names", "", "More DNS names for the webhook's certificate, comma-separated.")
	flag.StringVar(&o.webhook.URL, "webhook-url", "", "For a manager run outside the cluster (make run): https://HOST:PORT/convert, where the API server reaches this process. The conversion webhook listens on PORT with a certificate for HOST made in memory, and the CRD's conversion points at it while the manager runs; what it pointed at before is put back when the manager stops (kept meanwhile in the CRD's annotation webapp.example.com/conversion-before-local-run). Overrides --webhook-port, --cert-rotation and --webhook-cert-dir.")
	flag.BoolVar(&o.migrateStorage, "migrate-storage", true, "On becoming leader, rewrite every stored WebApp at the CRD's storage version and then set the CRD's status.storedVersions to it alone (default: on, but off with --namespace).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { o.migrateStorageSet = o.migrateStorageSet || f.Name == "migrate-storage" })
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(o); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(o options) error {
	if o.requeueAfter <= 0 {
		return errors.New("--requeue-after must be positive")
	}
	if o.maxConcurrentReconciles < 1 {
		return errors.New("--max-concurrent-reconciles must be at least 1")
	}
	if o.kubeAPIQPS == 0 || (o.kubeAPIQPS > 0 && o.kubeAPIBurst < 1) {
		return errors.New("--kube-api-qps must be positive (with --kube-api-burst at least 1) or negative (no client-side limit)")
	}
	namespaces, err := parseNamespaces(o.namespace)
	if err != nil {
		return err
	}
	if o.migrateStorage, err = migrateStorage(namespaces, o.migrateStorage, o.migrateStorageSet); err != nil {
		return err
	}
	scheme := controller.NewScheme()

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	// A negative QPS leaves client-go without a rate limiter (a zero would mean client-go's default of 5).
	cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	// The informers' watch streams are gzipped when the client accepts it (the API server compresses each event
	// for each watcher, uncached): in a cluster that is CPU spent on both sides for a link that needs none.
	cfg.DisableCompression = !o.kubeAPICompression
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controller.CacheOptions(namespaces...),
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "webapp-operator.example.com",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// Step down at once on SIGTERM, so a new leader need not wait out the lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	// The operator's namespace holds the certificate's Secret and the webhook's Service.
	o.webhook.Namespace = os.Getenv("POD_NAMESPACE")
	if o.webhook.Namespace == "" {
		o.webhook.Namespace = o.leaderElectionNamespace
	}
	if o.webhookDNSNames != "" {
		o.webhook.ExtraDNSNames = strings.Split(o.webhookDNSNames, ",")
	}
	// Port 0: another process serves conversion (a test harness, a manager run on a workstation); this one serves
	// none, and is ready without it.
	webhookStarted, webhookReady := healthz.Ping, (<-chan struct{})(closed())
	var conv *conversion.Webhook
	if o.webhook.Port != 0 || o.webhook.URL != "" {
		if conv, err = conversion.NewWebhook(cfg, scheme, o.webhook); err != nil {
			return fmt.Errorf("setting up the conversion webhook: %w", err)
		}
		webhookStarted, webhookReady = conv.Started, conv.Ready
	}
	if o.migrateStorage {
		if err := mgr.Add(&conversion.StorageMigrator{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Ready: webhookReady, Recheck: time.Minute}); err != nil {
			return err
		}
	}
	r := &controller.WebAppReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder(webappv2.FieldManager),
		RequeueAfter:            o.requeueAfter,
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Namespaces:              namespaces,
	}
	ctx := ctrl.SetupSignalHandler()
	switch err := r.SetupWithManager(ctx, mgr); {
	case meta.IsNoMatchError(err) && conv != nil:
		// WebApp v2 is not served: the first step of a rollback (docs/api.md). What is left to do is this process's
		// conversion webhook and storage migration, which need no v2; it does only that, rather than crash-loop.
		ctrl.Log.Info("WebApp v2 is not served: running only the conversion webhook and the storage migration", "error", err.Error())
	case err != nil:
		return fmt.Errorf("setting up the WebApp controller: %w", err)
	default:
		if err := controller.RegisterReadyCollector(ctx, mgr.GetCache()); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready only once the conversion webhook serves with a certificate the API server trusts.
	if err := mgr.AddReadyzCheck("conversion-webhook", webhookStarted); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "fieldManager", webappv2.FieldManager, "namespace", o.namespace, "requeueAfter", o.requeueAfter.String())
	if conv == nil {
		return mgr.Start(ctx)
	}
	// The conversion webhook runs beside the manager (see conversion.Webhook); either stopping stops both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	convDone := make(chan error, 1)
	go func() {
		err := conv.Start(ctx)
		cancel()
		convDone <- err
	}()
	err = mgr.Start(ctx)
	cancel()
	return errors.Join(err, <-convDone)
}

// metricsOptions serves /metrics in plain HTTP (for a local run), or over HTTPS with a self-signed certificate
// to callers whose bearer token the API server accepts and who may GET /metrics.
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		m.SecureServing = true
		m.FilterProvider = metricsauth.Filter
	}
	return m
}

// migrateStorage is whether the storage migration runs: it rewrites the WebApps of every namespace, so an install
// watching all namespaces does it; with --namespace it is off unless asked for, which is refused.
func migrateStorage(namespaces []string, on, given bool) (bool, error) {
	switch {
	case len(namespaces) == 0:
		return on, nil
	case on && given:
		return false, errors.New("--migrate-storage rewrites the WebApps of every namespace: it cannot be on with --namespace")
	default:
		return false, nil
	}
}

// parseNamespaces splits --namespace's comma-separated list, refusing what cannot be a namespace's name.
func parseNamespaces(flagValue string) ([]string, error) {
	if flagValue == "" {
		return nil, nil
	}
	var out []string
	for ns := range strings.SplitSeq(flagValue, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--namespace=%q: %q is not a namespace's name: %s", flagValue, ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
