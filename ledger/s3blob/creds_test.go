package s3blob

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The credential sources the AWS CLI accepts without a prompt, each against a
// local fake of what it talks to (SSO portal, STS, container endpoint, IMDS):
// each test checks that the S3 requests are signed with the credentials the
// source gave. Nothing leaves the machine: the environment's AWS settings are
// cleared, HOME is a temporary directory and IMDS is disabled unless tested.

// awsEnv clears the AWS configuration of the environment, makes HOME a
// temporary directory (~/.aws/sso/cache lives there) and points the shared
// files at config and credentials (written when not empty). It returns HOME.
func awsEnv(t *testing.T, config, creds string) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			os.Unsetenv(k) // "" is not unset for every setting the SDK reads
		}
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The SDK computes its default file names once, from the HOME it started
	// with: name them.
	for name, body := range map[string]string{"config": config, "credentials": creds} {
		p := filepath.Join(home, ".aws", name)
		t.Setenv(map[string]string{"config": "AWS_CONFIG_FILE", "credentials": "AWS_SHARED_CREDENTIALS_FILE"}[name], p)
		if body != "" {
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return home
}

// signer is an in-process S3 server (gofakes3) that records the access key
// and session token each request was signed with.
type signer struct {
	url         string
	mu          sync.Mutex
	seen        map[string]bool // "AKID token"
	checksummed bool            // a PUT carried a flexible checksum (x-amz-checksum-*, x-amz-trailer)
}

var credentialRE = regexp.MustCompile(`Credential=([^/]+)/`)

func newSigner(t *testing.T) *signer {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket(fakeBucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server()
	s := &signer{seen: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization"))
		if m == nil {
			http.Error(w, "unsigned request", http.StatusForbidden)
			return
		}
		s.mu.Lock()
		s.seen[m[1]+" "+r.Header.Get("X-Amz-Security-Token")] = true
		for h := range r.Header {
			if r.Method == http.MethodPut && (strings.HasPrefix(h, "X-Amz-Checksum-") || h == "X-Amz-Trailer" || h == "X-Amz-Sdk-Checksum-Algorithm") {
				s.checksummed = true
			}
		}
		s.mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// use opens a Store on the server with the AWS configuration of the
// environment, puts and stats an object, and returns the error, if any.
func (s *signer) use(t *testing.T) error {
	t.Helper()
	st, err := New(t.Context(), Config{Bucket: fakeBucket, Endpoint: s.url, PathStyle: true, TempDir: t.TempDir()})
	if err != nil {
		return err
	}
	b := bucket(st)
	if err := b.PutObject(t.Context(), "k", bytes.NewReader([]byte("signed")), 6); err != nil {
		return err
	}
	_, err = b.StatObject(t.Context(), "k")
	return err
}

// wantSigned uses the store and checks that every request was signed with
// key and token ("" for long-term keys).
func (s *signer) wantSigned(t *testing.T, key, token string) {
	t.Helper()
	if err := s.use(t); err != nil {
		t.Fatalf("put and stat: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := key + " " + token; len(s.seen) != 1 || !s.seen[want] {
		t.Fatalf("S3 requests signed with %q, want all with %q", keys(s.seen), want)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func writeFile(t *testing.T, path, body string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeSTS answers AssumeRole and AssumeRoleWithWebIdentity with the access
// key AKSTS and session token TSTS, recording each request's action, role,
// web identity token and Authorization header.
func fakeSTS(t *testing.T) (url string, seen *[]string) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		action := r.Form.Get("Action")
		mu.Lock()
		got = append(got, action+" "+r.Form.Get("RoleArn")+" "+r.Form.Get("WebIdentityToken")+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<%[1]sResponse><%[1]sResult><Credentials><AccessKeyId>AKSTS</AccessKeyId>`+
			`<SecretAccessKey>s</SecretAccessKey><SessionToken>TSTS</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>`+
			`</Credentials></%[1]sResult></%[1]sResponse>`, action)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &got
}

// fakeSSO is the IAM Identity Center portal's GetRoleCredentials: for the
// bearer token tok, account 111122223333 and role Reader it answers the
// access key AKSSO and session token TSSO.
func fakeSSO(t *testing.T, tok string) (url string, calls *int) {
	t.Helper()
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		q := r.URL.Query()
		if r.URL.Path != "/federation/credentials" || q.Get("account_id") != "111122223333" || q.Get("role_name") != "Reader" {
			http.Error(w, `{"message": "no such account or role"}`, http.StatusNotFound)
			return
		}
		if r.Header.Get("X-Amz-Sso_bearer_token") != tok {
			w.Header().Set("X-Amzn-Errortype", "UnauthorizedException")
			http.Error(w, `{"message": "bad token"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"roleCredentials": {"accessKeyId": "AKSSO", "secretAccessKey": "s", "sessionToken": "TSSO", "expiration": 4070908800000}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// ssoCache writes the token `aws sso login` caches for key (the sso-session
// name, or the start URL of a legacy profile) below home.
func ssoCache(t *testing.T, home, key, tok, expires string) {
	t.Helper()
	sum := sha1.Sum([]byte(key))
	b, err := json.Marshal(map[string]string{"accessToken": tok, "expiresAt": expires, "region": "eu-west-1", "startUrl": "https://corp.awsapps.com/start"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".aws", "sso", "cache", hex.EncodeToString(sum[:])+".json"), string(b), 0o600)
}

const ssoConfig = `[profile sso]
sso_session = corp
sso_account_id = 111122223333
sso_role_name = Reader
region = eu-west-1

[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1
sso_registration_scopes = sso:account:access
`

// TestSSO is issue 27's acceptance point: an SSO profile with a cached token
// reaches a local fake SSO endpoint and signs requests with the credentials
// it returns — the sso-session form `aws configure sso` writes, and the
// legacy form with the start URL in the profile.
func TestSSO(t *testing.T) {
	t.Run("sso-session", func(t *testing.T) {
		home := awsEnv(t, ssoConfig, "")
		ssoCache(t, home, "corp", "cached-token", "2099-01-01T00:00:00Z")
		url, calls := fakeSSO(t, "cached-token")
		t.Setenv("AWS_ENDPOINT_URL_SSO", url)
		t.Setenv("AWS_PROFILE", "sso")
		newSigner(t).wantSigned(t, "AKSSO", "TSSO")
		if *calls != 1 {
			t.Errorf("%d calls to the SSO portal, want 1 (the credentials are cached)", *calls)
		}
	})
	t.Run("legacy profile", func(t *testing.T) {
		home := awsEnv(t, "[profile old]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = eu-west-1\n"+
			"sso_account_id = 111122223333\nsso_role_name = Reader\n", "")
		ssoCache(t, home, "https://corp.awsapps.com/start", "legacy-token", "2099-01-01T00:00:00Z")
		url, _ := fakeSSO(t, "legacy-token")
		t.Setenv("AWS_ENDPOINT_URL_SSO", url)
		t.Setenv("AWS_PROFILE", "old")
		newSigner(t).wantSigned(t, "AKSSO", "TSSO")
	})
	t.Run("expired token says how to sign in again", func(t *testing.T) {
		home := awsEnv(t, ssoConfig, "")
		ssoCache(t, home, "corp", "cached-token", "2001-01-01T00:00:00Z")
		url, calls := fakeSSO(t, "cached-token")
		t.Setenv("AWS_ENDPOINT_URL_SSO", url)
		t.Setenv("AWS_ENDPOINT_URL_SSO_OIDC", url) // a refresh, without a refresh token, must not be tried
		t.Setenv("AWS_PROFILE", "sso")
		err := newSigner(t).use(t)
		if err == nil || !strings.Contains(err.Error(), "aws sso login --profile sso") {
			t.Fatalf("err = %v, want the way out: aws sso login --profile sso", err)
		}
		if *calls != 0 {
			t.Errorf("%d calls to the SSO portal with an expired token", *calls)
		}
	})
}

func TestCredentialSources(t *testing.T) {
	t.Run("environment keys", func(t *testing.T) {
		awsEnv(t, "", "[default]\naws_access_key_id = AKFILE\naws_secret_access_key = s\n")
		t.Setenv("AWS_ACCESS_KEY_ID", "AKENV")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
		t.Setenv("AWS_SESSION_TOKEN", "TENV")
		newSigner(t).wantSigned(t, "AKENV", "TENV")
	})
	t.Run("shared credentials file", func(t *testing.T) {
		awsEnv(t, "[default]\nregion = eu-west-1\n", "# comment\n[default]\naws_access_key_id = AKFILE\naws_secret_access_key = s\n")
		newSigner(t).wantSigned(t, "AKFILE", "")
	})
	t.Run("named profile in the config file", func(t *testing.T) {
		awsEnv(t, "[profile c]\naws_access_key_id = AKCONF\naws_secret_access_key = s\n", "[default]\naws_access_key_id = AKFILE\naws_secret_access_key = s\n")
		t.Setenv("AWS_PROFILE", "c")
		newSigner(t).wantSigned(t, "AKCONF", "")
	})
	t.Run("environment keys win over AWS_PROFILE, as in the AWS CLI", func(t *testing.T) {
		awsEnv(t, "[profile c]\naws_access_key_id = AKCONF\naws_secret_access_key = s\n", "")
		t.Setenv("AWS_PROFILE", "c")
		t.Setenv("AWS_ACCESS_KEY_ID", "AKENV")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
		newSigner(t).wantSigned(t, "AKENV", "")
	})
	t.Run("credential_process", func(t *testing.T) {
		home := awsEnv(t, "", "")
		script := writeFile(t, filepath.Join(home, "creds.sh"),
			"#!/bin/sh\necho '{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": \"s\", \"SessionToken\": \"TPROC\"}'\n", 0o755)
		writeFile(t, filepath.Join(home, ".aws", "config"), "[default]\ncredential_process = "+script+"\n", 0o600)
		newSigner(t).wantSigned(t, "AKPROC", "TPROC")
	})
	t.Run("assumed role with source_profile", func(t *testing.T) {
		awsEnv(t, "[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n", "[base]\naws_access_key_id = AKBASE\naws_secret_access_key = s\n")
		url, seen := fakeSTS(t)
		t.Setenv("AWS_ENDPOINT_URL_STS", url)
		t.Setenv("AWS_PROFILE", "r")
		newSigner(t).wantSigned(t, "AKSTS", "TSTS")
		// No region is configured: STS is signed for the default one too.
		if len(*seen) != 1 || !strings.HasPrefix((*seen)[0], "AssumeRole arn:aws:iam::1:role/r ") || !strings.Contains((*seen)[0], "Credential=AKBASE/") ||
			!strings.Contains((*seen)[0], "/"+DefaultRegion+"/sts/aws4_request") {
			t.Errorf("STS saw %q, want one AssumeRole signed with AKBASE for %s", *seen, DefaultRegion)
		}
	})
	t.Run("web identity", func(t *testing.T) {
		home := awsEnv(t, "", "")
		url, seen := fakeSTS(t)
		t.Setenv("AWS_ENDPOINT_URL_STS", url)
		t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", writeFile(t, filepath.Join(home, "token"), "jwt", 0o600))
		t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/web")
		newSigner(t).wantSigned(t, "AKSTS", "TSTS")
		if len(*seen) != 1 || (*seen)[0] != "AssumeRoleWithWebIdentity arn:aws:iam::1:role/web jwt " {
			t.Errorf("STS saw %q, want one unsigned AssumeRoleWithWebIdentity with the token", *seen)
		}
	})
	t.Run("container", func(t *testing.T) {
		home := awsEnv(t, "", "")
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/creds" || r.Header.Get("Authorization") != "tok" {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"AccessKeyId": "AKECS", "SecretAccessKey": "s", "Token": "TECS", "Expiration": "2099-01-01T00:00:00Z"}`))
		}))
		defer srv.Close()
		t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/creds")
		t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", writeFile(t, filepath.Join(home, "token"), "tok", 0o600))
		newSigner(t).wantSigned(t, "AKECS", "TECS")
	})
	t.Run("instance role (IMDS)", func(t *testing.T) {
		awsEnv(t, "", "")
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
				w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
				_, _ = w.Write([]byte("imds-token"))
			case r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imds-token":
				http.Error(w, "no session token", http.StatusUnauthorized)
			case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
				_, _ = w.Write([]byte("host-role"))
			case r.URL.Path == "/latest/meta-data/iam/security-credentials/host-role":
				_, _ = w.Write([]byte(`{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "AKIMDS", "SecretAccessKey": "s", "Token": "TIMDS", "Expiration": "2099-01-01T00:00:00Z"}`))
			default:
				http.NotFound(w, r)
			}
		}))
		defer srv.Close()
		os.Unsetenv("AWS_EC2_METADATA_DISABLED")
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
		newSigner(t).wantSigned(t, "AKIMDS", "TIMDS")
	})
	t.Run("a profile that is not there", func(t *testing.T) {
		awsEnv(t, "[default]\n", "")
		t.Setenv("AWS_PROFILE", "missing")
		if err := newSigner(t).use(t); err == nil || !strings.Contains(err.Error(), `"missing" (AWS_PROFILE)`) || !strings.Contains(err.Error(), "unset AWS_PROFILE") {
			t.Fatalf("err = %v, want one naming the profile and the way out", err)
		}
	})
}

// TestChecksumSettings: against an endpoint of one's own (an S3-compatible
// server that may lack the newest checksum headers) puts carry no flexible
// checksum and responses are not validated, unless the AWS configuration asks
// for them; on AWS the SDK's default (when_supported) holds.
func TestChecksumSettings(t *testing.T) {
	for _, tc := range []struct {
		name, env   string
		endpoint    bool
		req         aws.RequestChecksumCalculation
		resp        aws.ResponseChecksumValidation
		checksummed bool
	}{
		{"own endpoint", "", true, aws.RequestChecksumCalculationWhenRequired, aws.ResponseChecksumValidationWhenRequired, false},
		{"own endpoint, configured", "when_supported", true, aws.RequestChecksumCalculationWhenSupported, aws.ResponseChecksumValidationWhenSupported, true},
		{"AWS", "", false, aws.RequestChecksumCalculationWhenSupported, aws.ResponseChecksumValidationWhenSupported, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsEnv(t, "", "[default]\naws_access_key_id = AK\naws_secret_access_key = s\n")
			if tc.env != "" {
				t.Setenv("AWS_REQUEST_CHECKSUM_CALCULATION", tc.env)
				t.Setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", tc.env)
			}
			srv := newSigner(t)
			cfg := Config{Bucket: fakeBucket, PathStyle: true}
			if tc.endpoint {
				cfg.Endpoint = srv.url
			}
			st, err := New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if o := st.client.Options(); o.RequestChecksumCalculation != tc.req || o.ResponseChecksumValidation != tc.resp {
				t.Fatalf("checksums %v/%v, want %v/%v", o.RequestChecksumCalculation, o.ResponseChecksumValidation, tc.req, tc.resp)
			}
			if !tc.endpoint {
				return // no request to AWS
			}
			if err := srv.use(t); err != nil {
				t.Fatal(err)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if srv.checksummed != tc.checksummed {
				t.Fatalf("a put carried a flexible checksum: %v, want %v", srv.checksummed, tc.checksummed)
			}
		})
	}
}
