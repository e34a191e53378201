package s3

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// awsEnv clears the AWS configuration of the environment and points the
// shared files at config and credentials (written when not empty).
func awsEnv(t *testing.T, config, creds string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
		}
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	dir := t.TempDir()
	for name, body := range map[string]string{"config": config, "credentials": creds} {
		p := filepath.Join(dir, name)
		if body != "" {
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv(map[string]string{"config": "AWS_CONFIG_FILE", "credentials": "AWS_SHARED_CREDENTIALS_FILE"}[name], p)
	}
}

// keysOf resolves the chain and returns the access key and region it gives.
func keysOf(t *testing.T) (key, region string) {
	t.Helper()
	s, err := loadAWS(Config{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.creds.Retrieve(context.Background())
	if err != nil {
		t.Fatalf("retrieve: %v", err)
	}
	if c.AccessKeyID == "AKSTS" && (!c.CanExpire || c.Expires.Year() != 2099 || c.SessionToken != "t") {
		t.Errorf("assumed role credentials %+v: want the session token and expiry STS gave", c)
	}
	return c.AccessKeyID, s.region
}

// fakeSTS answers AssumeRole and AssumeRoleWithWebIdentity with the access
// key AKSTS, recording each request's action and Authorization header.
func fakeSTS(t *testing.T) (url string, seen *[]string) {
	t.Helper()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		action := r.Form.Get("Action")
		got = append(got, action+" "+r.Form.Get("RoleArn")+" "+r.Form.Get("WebIdentityToken")+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<` + action + `Response><` + action + `Result><Credentials><AccessKeyId>AKSTS</AccessKeyId>` +
			`<SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>` +
			`</Credentials></` + action + `Result></` + action + `Response>`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &got
}

// TestAWSChain: the credential and region sources of the AWS default chain
// that loadAWS reads, in the SDK's order.
func TestAWSChain(t *testing.T) {
	t.Run("environment keys", func(t *testing.T) {
		awsEnv(t, "[default]\nregion = eu-west-1\n", "[default]\naws_access_key_id = AKFILE\naws_secret_access_key = s\n")
		t.Setenv("AWS_ACCESS_KEY_ID", "AKENV")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
		t.Setenv("AWS_REGION", "eu-central-1")
		if k, r := keysOf(t); k != "AKENV" || r != "eu-central-1" {
			t.Errorf("got %s %s, want AKENV eu-central-1", k, r)
		}
	})
	t.Run("default profile", func(t *testing.T) {
		awsEnv(t, "[default]\nregion = eu-west-1\n", "# comment\n[default]\naws_access_key_id = AKFILE\naws_secret_access_key = s\n")
		if k, r := keysOf(t); k != "AKFILE" || r != "eu-west-1" {
			t.Errorf("got %s %s, want AKFILE eu-west-1", k, r)
		}
	})
	t.Run("named profile wins over environment keys", func(t *testing.T) {
		awsEnv(t, "[profile p]\nregion = ap-south-1\ns3 =\n  addressing_style = path\n", "[p]\naws_access_key_id = AKP\naws_secret_access_key = s\n")
		t.Setenv("AWS_PROFILE", "p")
		t.Setenv("AWS_ACCESS_KEY_ID", "AKENV")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
		if k, r := keysOf(t); k != "AKP" || r != "ap-south-1" {
			t.Errorf("got %s %s, want AKP ap-south-1", k, r)
		}
	})
	t.Run("keys in the config file", func(t *testing.T) {
		awsEnv(t, "[profile c]\naws_access_key_id = AKCONF\naws_secret_access_key = s\n", "")
		t.Setenv("AWS_PROFILE", "c")
		if k, r := keysOf(t); k != "AKCONF" || r != DefaultRegion {
			t.Errorf("got %s %s, want AKCONF %s", k, r, DefaultRegion)
		}
	})
	t.Run("credential_process", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "creds.sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\necho '{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": \"s\"}'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		awsEnv(t, "[default]\ncredential_process = "+script+"\n", "")
		if k, _ := keysOf(t); k != "AKPROC" {
			t.Errorf("got %s, want AKPROC", k)
		}
	})
	t.Run("container", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "tok" {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"AccessKeyId": "AKECS", "SecretAccessKey": "s", "Token": "t", "Expiration": "2099-01-01T00:00:00Z"}`))
		}))
		defer srv.Close()
		awsEnv(t, "", "")
		t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/creds")
		tok := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tok, []byte("tok\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tok)
		if k, _ := keysOf(t); k != "AKECS" {
			t.Errorf("got %s, want AKECS", k)
		}
	})
	t.Run("web identity from the environment", func(t *testing.T) {
		awsEnv(t, "", "")
		url, seen := fakeSTS(t)
		t.Setenv("AWS_ENDPOINT_URL_STS", url)
		tok := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tok, []byte("jwt"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tok)
		t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/web")
		if k, _ := keysOf(t); k != "AKSTS" {
			t.Errorf("got %s, want AKSTS", k)
		}
		if len(*seen) != 1 || (*seen)[0] != "AssumeRoleWithWebIdentity arn:aws:iam::1:role/web jwt " {
			t.Errorf("STS saw %q", *seen)
		}
	})
	t.Run("role with source_profile", func(t *testing.T) {
		awsEnv(t, "[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n", "[base]\naws_access_key_id = AKBASE\naws_secret_access_key = s\n")
		url, seen := fakeSTS(t)
		t.Setenv("AWS_ENDPOINT_URL_STS", url)
		t.Setenv("AWS_PROFILE", "r")
		if k, _ := keysOf(t); k != "AKSTS" {
			t.Errorf("got %s, want AKSTS", k)
		}
		if len(*seen) != 1 || !strings.HasPrefix((*seen)[0], "AssumeRole arn:aws:iam::1:role/r ") || !strings.Contains((*seen)[0], "Credential=AKBASE/") {
			t.Errorf("STS saw %q, want an AssumeRole signed with AKBASE", *seen)
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct{ profile, config, want string }{
			{"sso", "[profile sso]\nsso_session = corp\nsso_account_id = 1\n", "export-credentials --profile sso"},
			{"mfa", "[profile mfa]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = mfa\nmfa_serial = x\n", "mfa_serial"},
			{"missing", "[default]\n", `"missing" (AWS_PROFILE) is in neither`},
			{"loop", "[profile loop]\nrole_arn = a\nsource_profile = other\n[profile other]\nrole_arn = a\nsource_profile = loop\n", "a loop?"},
		} {
			awsEnv(t, tc.config, "")
			t.Setenv("AWS_PROFILE", tc.profile)
			if _, err := loadAWS(Config{Bucket: "b"}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("profile %s: %v, want an error naming %q", tc.profile, err, tc.want)
			}
		}
	})
}
