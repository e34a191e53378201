package gcsblob

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// googleFake is a local stand-in for the Google endpoints Application Default
// Credentials talk to: the OAuth2 token endpoint (a service account's signed
// JWT, or workload identity federation's token exchange), IAM Credentials'
// generateAccessToken (impersonation), and the metadata server. Each hands out
// a token only for what it checks, so the token a request carries says which
// way it was obtained.
type googleFake struct {
	*httptest.Server
	key *rsa.PrivateKey

	mu   sync.Mutex
	errs []string
}

const (
	saEmail        = "ledger@project.iam.gserviceaccount.com"
	tokenSA        = "token-service-account"
	tokenFederated = "token-federated"
	tokenImperson  = "token-impersonated"
	tokenMetadata  = "token-metadata"
	subjectToken   = "subject-token-from-the-workload"
)

func newGoogleFake(t *testing.T) *googleFake {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &googleFake{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", g.token)
	mux.HandleFunc("POST /v1/projects/-/serviceAccounts/{sa}", g.impersonate)
	mux.HandleFunc("GET /computeMetadata/v1/instance/service-accounts/default/token", g.metadataToken)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		g.fail("unexpected request %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	t.Cleanup(func() {
		for _, e := range g.errs {
			t.Error(e)
		}
	})
	return g
}

func (g *googleFake) fail(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
}

func writeToken(w http.ResponseWriter, token string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`, token)
}

// token is the OAuth2 token endpoint: a JWT signed by the service account's key
// (RS256, checked against the public key), or a token exchange of the
// workload's subject token.
func (g *googleFake) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch r.Form.Get("grant_type") {
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		parts := strings.Split(r.Form.Get("assertion"), ".")
		if len(parts) != 3 {
			http.Error(w, "bad assertion", http.StatusBadRequest)
			return
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if err != nil || rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		writeToken(w, tokenSA)
	case "urn:ietf:params:oauth:grant-type:token-exchange":
		if r.Form.Get("subject_token") != subjectToken {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		writeToken(w, tokenFederated)
	default:
		g.fail("token endpoint: grant_type %q", r.Form.Get("grant_type"))
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
	}
}

// impersonate is IAM Credentials' generateAccessToken for saEmail, granted to
// a caller holding a token of its own.
func (g *googleFake) impersonate(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("sa") != saEmail+":generateAccessToken" {
		http.NotFound(w, r)
		return
	}
	switch r.Header.Get("Authorization") {
	case "Bearer " + tokenSA, "Bearer " + tokenFederated:
	default:
		http.Error(w, `{"error":{"code":401,"message":"no source credential"}}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"accessToken":%q,"expireTime":%q}`, tokenImperson, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

// metadataToken is the metadata server's token of the instance's (or, on GKE
// with workload identity, the pod's) service account.
func (g *googleFake) metadataToken(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "missing Metadata-Flavor", http.StatusForbidden)
		return
	}
	writeToken(w, tokenMetadata)
}

// serviceAccountKey is a service account key file's JSON for g's key.
func (g *googleFake) serviceAccountKey(t *testing.T) map[string]any {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(g.key)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"type":           "service_account",
		"project_id":     "project",
		"private_key_id": "key-1",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   saEmail,
		"client_id":      "1",
		"token_uri":      g.URL + "/token",
	}
}

func (g *googleFake) impersonationURL() string {
	return g.URL + "/v1/projects/-/serviceAccounts/" + saEmail + ":generateAccessToken"
}

// writeJSON writes v as a JSON file in a temporary directory and returns its path.
func writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCredentials checks that a store New builds without an HTTPClient
// authorizes its requests with each kind of Application Default Credentials the
// storage client accepts, against local fakes of Google's token, IAM and
// metadata endpoints (nothing leaves the machine): the bucket's API answers only
// requests carrying the token the credential's own flow ends with.
func TestCredentials(t *testing.T) {
	fake, err := url.Parse(startFake(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, g *googleFake) // sets the environment
		want  string                            // the token the requests must carry
	}{
		{"service account key", func(t *testing.T, g *googleFake) {
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", writeJSON(t, "sa.json", g.serviceAccountKey(t)))
		}, tokenSA},
		{"workload identity federation with impersonation", func(t *testing.T, g *googleFake) {
			subject := filepath.Join(t.TempDir(), "subject-token")
			if err := os.WriteFile(subject, []byte(subjectToken), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", writeJSON(t, "wif.json", map[string]any{
				"type":                              "external_account",
				"audience":                          "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/ci",
				"subject_token_type":                "urn:ietf:params:oauth:token-type:jwt",
				"token_url":                         g.URL + "/token",
				"service_account_impersonation_url": g.impersonationURL(),
				"credential_source":                 map[string]any{"file": subject},
			}))
		}, tokenImperson},
		{"workload identity federation, direct access", func(t *testing.T, g *googleFake) {
			subject := filepath.Join(t.TempDir(), "subject-token")
			if err := os.WriteFile(subject, []byte(subjectToken), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", writeJSON(t, "wif.json", map[string]any{
				"type":               "external_account",
				"audience":           "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/ci",
				"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
				"token_url":          g.URL + "/token",
				"credential_source":  map[string]any{"file": subject},
			}))
		}, tokenFederated},
		{"impersonated service account", func(t *testing.T, g *googleFake) {
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", writeJSON(t, "imp.json", map[string]any{
				"type":                              "impersonated_service_account",
				"service_account_impersonation_url": g.impersonationURL(),
				"source_credentials":                g.serviceAccountKey(t),
			}))
		}, tokenImperson},
		{"gcloud application-default credentials file", func(t *testing.T, g *googleFake) {
			// `gcloud auth application-default login --impersonate-service-account`
			// writes this file; GOOGLE_APPLICATION_CREDENTIALS is unset.
			dir := filepath.Join(os.Getenv("HOME"), ".config", "gcloud")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(map[string]any{
				"type":                              "impersonated_service_account",
				"service_account_impersonation_url": g.impersonationURL(),
				"source_credentials":                g.serviceAccountKey(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "application_default_credentials.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, tokenImperson},
		{"metadata server (GCE, Cloud Run, GKE workload identity)", func(t *testing.T, g *googleFake) {
			t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(g.URL, "http://"))
		}, tokenMetadata},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No credential from the machine running the test.
			t.Setenv("HOME", t.TempDir())
			t.Setenv("CLOUDSDK_CONFIG", "")
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
			t.Setenv("GCE_METADATA_HOST", "")
			t.Setenv("STORAGE_EMULATOR_HOST", "")
			g := newGoogleFake(t)
			tc.setup(t, g)

			proxy := httputil.NewSingleHostReverseProxy(fake)
			var refused atomic.Int64
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Get("Authorization"); got != "Bearer "+tc.want {
					refused.Add(1)
					t.Errorf("%s %s with Authorization %q, want the token %q", r.Method, r.URL.Path, got, tc.want)
					http.Error(w, `{"error":{"code":401,"message":"no credentials"}}`, http.StatusUnauthorized)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(api.Close)

			s, err := New(t.Context(), Config{Bucket: fakeBucket, Endpoint: api.URL})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			ctx := t.Context()
			if err := bucket(s).PutObject(ctx, "k", strings.NewReader("v"), 1); err != nil {
				t.Fatal(err)
			}
			if _, err := bucket(s).StatObject(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if n := refused.Load(); n != 0 {
				t.Fatalf("%d requests without the token", n)
			}
		})
	}
}

// TestUnauthorizedRefused checks the other side of TestCredentials: a server
// that demands a token refuses a store without one, and the error carries the
// status (so the retrying store does not retry it).
func TestUnauthorizedRefused(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":401,"message":"no credentials"}}`, http.StatusUnauthorized)
	}))
	t.Cleanup(api.Close)
	s, err := New(t.Context(), Config{Bucket: fakeBucket, Endpoint: api.URL, HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bucket(s).StatObject(t.Context(), "k")
	var status interface{ HTTPStatusCode() int }
	if err == nil || !errors.As(err, &status) || status.HTTPStatusCode() != http.StatusUnauthorized {
		t.Fatalf("stat without credentials = %v, want an error with HTTP status 401", err)
	}
	if ledger.DefaultRetryable(err) {
		t.Errorf("DefaultRetryable(%v) = true, want false", err)
	}
}

// TestClientMadeOnFirstUse checks that New looks for no credentials (a
// command that opens the store but reads nothing pays nothing for them), and
// that the first use reports a credential that cannot be found with the way
// out.
func TestClientMadeOnFirstUse(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	s, err := New(t.Context(), Config{Bucket: fakeBucket})
	if err != nil {
		t.Fatalf("New with an unreadable credential file = %v, want no error until first use", err)
	}
	defer s.Close()
	_, err = bucket(s).StatObject(t.Context(), "k")
	if err == nil || !strings.Contains(err.Error(), "missing.json") || !strings.Contains(err.Error(), "gcloud auth application-default login") {
		t.Fatalf("first use = %v, want the credential file's error and the way out", err)
	}
	if _, err := bucket(s).StatObject(t.Context(), "k"); err == nil {
		t.Fatal("second use succeeded")
	}
}
