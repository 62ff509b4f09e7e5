package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
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
	// conversion caBundle (cert-controller's rotator; CertDir is the Secret mounted as a volume). Off, the
	// certificate files and the caBundle come from elsewhere (cert-manager, a test's own CA).
	Rotate                bool
	Namespace, SecretName string
	// ServiceName is the Service the API server calls, in Namespace: the certificate is for its DNS names and
	// ExtraDNSNames (localhost, for a manager run outside the cluster).
	ServiceName   string
	ExtraDNSNames []string
}

// SetupConversionWebhook serves WebApp conversion (v1 to and from the v2 hub) at /convert on every replica, leader
// or not: conversion sits on the read path of every request for a version other than the stored one. The server
// starts only once its certificate is in place and the CRD trusts its CA, so a replica is ready (the returned
// check) only when the API server can call it. It returns a channel closed at that moment.
func SetupConversionWebhook(mgr manager.Manager, o WebhookOptions) (healthz.Checker, <-chan struct{}, error) {
	handler, err := NewConversionHandler(mgr.GetScheme())
	if err != nil {
		return nil, nil, err
	}
	server := webhook.NewServer(webhook.Options{Port: o.Port, CertDir: o.CertDir})
	server.Register("/convert", handler)

	certsReady := make(chan struct{})
	if o.Rotate {
		if o.Namespace == "" || o.SecretName == "" || o.ServiceName == "" {
			return nil, nil, errors.New("certificate rotation needs the namespace, the Secret's and the Service's names")
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
			FieldOwner:     FieldManager,
			// Every replica serves conversion, so every replica needs the certificate: the Secret is written with
			// optimistic concurrency, and a replica that loses the race reads the winner's.
			RequireLeaderElection: false,
			EnableReadinessCheck:  true,
		}); err != nil {
			return nil, nil, fmt.Errorf("setting up certificate rotation: %w", err)
		}
	} else {
		close(certsReady)
	}
	if err := mgr.Add(webhookAfterCerts{server: server, ready: certsReady}); err != nil {
		return nil, nil, err
	}
	return server.StartedChecker(), certsReady, nil
}

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

// NewConversionHandler is the /convert handler: WebApp v1 to and from the v2 hub, by the functions of
// apis/v1/conversion.go. scheme must know both versions (NewScheme).
func NewConversionHandler(scheme *runtime.Scheme) (http.Handler, error) {
	converter, err := conversion.NewHubSpokeConverter(&webappv2.WebApp{},
		conversion.NewSpokeConverter(&webappv1.WebApp{},
			func(_ context.Context, hub *webappv2.WebApp, spoke *webappv1.WebApp) error {
				return webappv1.ConvertFromHub(hub, spoke)
			},
			func(_ context.Context, spoke *webappv1.WebApp, hub *webappv2.WebApp) error {
				return webappv1.ConvertToHub(spoke, hub)
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
