package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// frontProxyClient is the name of the aggregation layer's client certificate.
const frontProxyClient = "front-proxy-client"

// pki is the real node's certificate authority and the files made from it, in one directory: a CA, the API
// server's serving certificate (valid for every address a client or a pod uses), an admin client certificate
// (system:masters), the aggregation layer's proxy client certificate and the service-account signing key.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

// newPKI writes ca.crt/ca.key, apiserver.crt/key, admin.crt/key, front-proxy-client.crt/key and sa.key/sa.pub
// into dir.
func newPKI(dir string, serverIPs []net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, serial: 1}
	var err error
	if p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	caTmpl := p.template(pkix.Name{CommonName: "webapp-realnode-ca"})
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, p.caKey.Public(), p.caKey)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if err := p.write("ca", der, p.caKey); err != nil {
		return nil, err
	}
	server := p.template(pkix.Name{CommonName: "kube-apiserver"})
	server.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	server.IPAddresses = serverIPs
	server.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if err := p.issue("apiserver", server); err != nil {
		return nil, err
	}
	admin := p.template(pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}})
	admin.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if err := p.issue("admin", admin); err != nil {
		return nil, err
	}
	// The API server's identity towards extension API servers (metrics-server): they trust request headers only
	// from a client certificate of this name (--requestheader-allowed-names). kubeadm signs it with a CA of its own;
	// one CA is enough here, since that name is allowed nothing else.
	proxy := p.template(pkix.Name{CommonName: frontProxyClient})
	proxy.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if err := p.issue(frontProxyClient, proxy); err != nil {
		return nil, err
	}
	return p, p.serviceAccountKey()
}

// template is a certificate valid for a day, with the next serial number.
func (p *pki) template(subject pkix.Name) *x509.Certificate {
	p.serial++
	return &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// issue signs a new key's certificate with the CA and writes name.crt and name.key.
func (p *pki) issue(name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		return fmt.Errorf("signing %s: %w", name, err)
	}
	return p.write(name, der, key)
}

// serviceAccountKey writes sa.key and sa.pub, with which the API server signs and checks service-account tokens.
func (p *pki) serviceAccountKey() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writePEM(p.path("sa.key"), "PRIVATE KEY", priv); err != nil {
		return err
	}
	return writePEM(p.path("sa.pub"), "PUBLIC KEY", pub)
}

// write stores a certificate and its key as name.crt and name.key.
func (p *pki) write(name string, der []byte, key crypto.Signer) error {
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(p.path(name+".key"), "PRIVATE KEY", priv)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// kubeconfig writes an admin kubeconfig for server to file.
func (p *pki) kubeconfig(file, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["realnode"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.path("ca.crt")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: p.path("admin.crt"), ClientKey: p.path("admin.key")}
	cfg.Contexts["realnode"] = &clientcmdapi.Context{Cluster: "realnode", AuthInfo: "admin"}
	cfg.CurrentContext = "realnode"
	return clientcmd.WriteToFile(*cfg, file)
}

func writePEM(file, kind string, der []byte) error {
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
