package conversion

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// SavedConversionAnnotation keeps, on the CRD, its spec.conversion as it was before a manager run outside the
// cluster (make run) pointed it at itself; that manager puts it back and removes the annotation when it stops. A
// run that was killed leaves it, and the next run puts back what it says.
const SavedConversionAnnotation = "webapp.example.com/conversion-before-local-run"

// localEndpoint is a conversion webhook served by a manager run outside the cluster, at an address the API
// server reaches: its certificate, made in memory for that address, and the CRD pointed at it while it runs.
type localEndpoint struct {
	url      string
	certDir  string
	bindHost string
	port     int
	caPEM    []byte
}

// newLocalEndpoint parses rawURL (https://HOST:PORT/convert), and writes a certificate for HOST, signed by a CA
// made for this run alone (it never leaves this process but as the CRD's caBundle), into a directory of its own
// (removed when the run stops).
func newLocalEndpoint(rawURL string) (*localEndpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--webhook-url: %w", err)
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || u.Path != "/convert" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("--webhook-url=%q: want https://HOST:PORT/convert", rawURL)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("--webhook-url=%q: bad port", rawURL)
	}
	host := u.Hostname()
	// The server listens on the address the API server calls when it is one of this machine's (loopback, a
	// bridge's gateway); for a name, on loopback when it is localhost, on every address otherwise.
	bind := ""
	if ip := net.ParseIP(host); ip != nil {
		bind = host
	} else if host == "localhost" {
		bind = "127.0.0.1"
	}
	caPEM, certPEM, keyPEM, err := selfSignedChain(host, time.Now())
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp("", "webapp-operator-local-webhook-")
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			_ = os.RemoveAll(certDir)
			return nil, err
		}
	}
	return &localEndpoint{url: u.String(), certDir: certDir, bindHost: bind, port: port, caPEM: caPEM}, nil
}

// selfSignedChain makes a CA and a serving certificate for host (an IP address or a DNS name), valid for a year.
func selfSignedChain(host string, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "webapp-operator local run CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host}
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, key.Public(), caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// pointCRD points the CRD's conversion at the local endpoint until ctx ends, then puts back what was there, and
// closes pointed once the CRD points here. Server-Side Apply cannot express it (the Service in the installed
// conversion is another manager's field, and a conversion names a Service or a URL, not both), so each is a JSON
// patch guarded by the resourceVersion read.
type pointCRD struct {
	client   client.Client
	endpoint *localEndpoint
	// started is the webhook server's: the CRD points here only once it answers.
	started healthz.Checker
	pointed chan struct{}
}

func (p *pointCRD) NeedLeaderElection() bool { return false }

func (p *pointCRD) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("local-conversion")
	local := &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &p.endpoint.url, CABundle: p.endpoint.caPEM},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	defer func() { _ = os.RemoveAll(p.endpoint.certDir) }()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return p.started(nil) == nil, nil
	}); err != nil {
		return nil
	}
	var saved string
	if err := p.patch(ctx, func(crd *unstructured.Unstructured) (any, string, error) {
		s, err := savedConversion(crd)
		saved = s
		return local, s, err
	}); err != nil {
		return fmt.Errorf("pointing the CRD's conversion at %s: %w", p.endpoint.url, err)
	}
	logger.Info("the CRD's conversion points at this process until it stops", "url", p.endpoint.url, "before", saved)
	close(p.pointed)
	<-ctx.Done()

	// Put back what was there, with a deadline of its own: ctx is done.
	restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var before any
	if err := json.Unmarshal([]byte(saved), &before); err != nil {
		return err
	}
	if err := p.patch(restoreCtx, func(*unstructured.Unstructured) (any, string, error) { return before, "", nil }); err != nil {
		return fmt.Errorf("putting back the CRD's conversion (%s, kept in its annotation %s): %w", saved, SavedConversionAnnotation, err)
	}
	logger.Info("put back the CRD's conversion", "conversion", saved)
	return nil
}

// savedConversion is the conversion to put back: the annotation's, left by a run that was killed, or the CRD's own.
func savedConversion(crd *unstructured.Unstructured) (string, error) {
	if s, ok := crd.GetAnnotations()[SavedConversionAnnotation]; ok {
		return s, nil
	}
	conv, _, err := unstructured.NestedFieldNoCopy(crd.Object, "spec", "conversion")
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(conv)
	return string(raw), err
}

// patch sets the CRD's spec.conversion to what next returns, and its annotation to the string (none when empty),
// guarded by the resourceVersion it read; a conflict reads again.
func (p *pointCRD) patch(ctx context.Context, next func(*unstructured.Unstructured) (any, string, error)) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := p.client.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
			return false, err
		}
		conv, annotation, err := next(crd)
		if err != nil {
			return false, err
		}
		ops := []map[string]any{
			{"op": "test", "path": "/metadata/resourceVersion", "value": crd.GetResourceVersion()},
			{"op": "replace", "path": "/spec/conversion", "value": conv},
		}
		if _, has := crd.GetAnnotations()[SavedConversionAnnotation]; annotation != "" {
			ops = append(ops, addAnnotationOp(crd.GetAnnotations(), SavedConversionAnnotation, annotation))
		} else if has {
			ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/annotations/" + jsonPointerEscape(SavedConversionAnnotation)})
		}
		raw, err := json.Marshal(ops)
		if err != nil {
			return false, err
		}
		err = p.client.Patch(ctx, crd, client.RawPatch(types.JSONPatchType, raw))
		if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			// A failed test (someone wrote the CRD in between): read it again.
			return false, nil
		}
		return err == nil, err
	})
}

// addAnnotationOp is the JSON patch operation that sets the annotation key to value on an object whose annotations
// are current: the whole map when there is none (a pointer into a missing map fails).
func addAnnotationOp(current map[string]string, key, value string) map[string]any {
	if current == nil {
		return map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{key: value}}
	}
	return map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(key), "value": value}
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
