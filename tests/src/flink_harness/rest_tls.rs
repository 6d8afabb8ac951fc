//! REST over TLS with mutual authentication (`security.ssl.rest.enabled`,
//! `security.ssl.rest.authentication-enabled`): key material made with the JDK's `keytool` and
//! `openssl`, as an operator would make it, the Flink settings that use it, and the rustls
//! configuration of a client that presents the agent's certificate.
//!
//! One private CA signs two RSA keys: the JobManager's REST key (PKCS12 keystore) and the
//! agent's (PEM). Flink's truststore holds the CA, so it accepts the agent's certificate, and
//! Flink's own REST client (the CLI) presents the REST key. RSA because Flink's default
//! `security.ssl.algorithms` are ECDHE_RSA suites.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use flink_autoscale_shared::http_client::{client_tls, trusted_roots, ClientIdentity};
use rand::distr::{Alphanumeric, SampleString};

use super::HarnessError;

const STEP: &str = "make REST TLS keys (keytool, openssl)";
/// keytool and openssl read the password from here, never from their command line.
const PASSWORD_ENV: &str = "FLINK_REST_TLS_PASSWORD";
/// Both certificates name the loopback address the cluster binds, as IP and DNS SANs: the
/// agent and the harness check the name.
const SAN: &str = "SAN=ip:127.0.0.1,dns:localhost";

/// The files of one REST TLS setup, all in one folder. `Debug` leaves out the password.
#[derive(Clone)]
pub struct RestTls {
    password: String,
    /// The CA certificate (PEM): the agent's `jobmanager.ca_file`.
    pub ca_pem: PathBuf,
    /// The JobManager's REST key and its certificate chain (PKCS12).
    pub keystore: PathBuf,
    /// The CA alone (PKCS12): which client certificates Flink accepts.
    pub truststore: PathBuf,
    /// The agent's certificate (PEM): `jobmanager.client_cert_file`.
    pub client_cert_pem: PathBuf,
    /// The agent's private key (PEM, unencrypted): `jobmanager.client_key_file`.
    pub client_key_pem: PathBuf,
}

impl fmt::Debug for RestTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestTls")
            .field("ca_pem", &self.ca_pem)
            .field("keystore", &self.keystore)
            .field("truststore", &self.truststore)
            .field("client_cert_pem", &self.client_cert_pem)
            .field("client_key_pem", &self.client_key_pem)
            .finish_non_exhaustive()
    }
}

impl RestTls {
    /// Makes a CA, the REST keystore, the truststore and the agent's PEM files in `dir`
    /// (about 6 s: every keytool call starts a JVM).
    pub async fn generate(dir: &Path) -> Result<Self, HarnessError> {
        let password = Alphanumeric.sample_string(&mut rand::rng(), 24);
        let tool = Tool {
            dir,
            password: &password,
        };
        let ca_pem = tool.ca("ca").await?;
        for who in ["rest", "agent"] {
            tool.signed_key(who, "ca").await?;
        }
        tool.keytool(
            "-importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 \
             -storetype PKCS12",
        )
        .await?;
        tool.run(
            "openssl",
            &format!(
                "pkcs12 -in agent.p12 -passin env:{PASSWORD_ENV} -nocerts -nodes -out agent.key"
            ),
        )
        .await?;
        Ok(Self {
            password,
            ca_pem,
            keystore: dir.join("rest.p12"),
            truststore: dir.join("truststore.p12"),
            client_cert_pem: dir.join("agent.pem"),
            client_key_pem: dir.join("agent.key"),
        })
    }

    /// A CA of its own in `dir/<name>.pem` that signed nothing of this setup: a wrong
    /// `jobmanager.ca_file`.
    pub async fn unrelated_ca(dir: &Path, name: &str) -> Result<PathBuf, HarnessError> {
        let password = Alphanumeric.sample_string(&mut rand::rng(), 24);
        let tool = Tool {
            dir,
            password: &password,
        };
        tool.ca(name).await
    }

    /// The cluster's `security.ssl.rest.*` settings for these files.
    pub fn flink_settings(&self) -> Vec<(String, String)> {
        let path = |p: &Path| p.display().to_string();
        [
            ("security.ssl.rest.enabled", "true".to_owned()),
            (
                "security.ssl.rest.authentication-enabled",
                "true".to_owned(),
            ),
            ("security.ssl.rest.keystore", path(&self.keystore)),
            ("security.ssl.rest.keystore-type", "PKCS12".to_owned()),
            ("security.ssl.rest.keystore-password", self.password.clone()),
            // PKCS12 keeps one password for the store and its keys.
            ("security.ssl.rest.key-password", self.password.clone()),
            ("security.ssl.rest.truststore", path(&self.truststore)),
            ("security.ssl.rest.truststore-type", "PKCS12".to_owned()),
            (
                "security.ssl.rest.truststore-password",
                self.password.clone(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// A client trusting the CA and presenting the agent's certificate.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, HarnessError> {
        let fail = |e: &dyn fmt::Display| HarnessError::new(STEP, format!("client TLS: {e}"));
        let roots = trusted_roots(Some(&self.ca_pem)).map_err(|e| fail(&e))?;
        let identity = ClientIdentity::load(&self.client_cert_pem, &self.client_key_pem)
            .map_err(|e| fail(&e))?;
        client_tls(roots, Some(identity)).map_err(|e| fail(&e))
    }
}

/// keytool and openssl in one folder with one password. Arguments are split at spaces: they
/// name files in the folder by bare names.
struct Tool<'a> {
    dir: &'a Path,
    password: &'a str,
}

impl Tool<'_> {
    /// A self-signed CA key in `<name>.p12`, its certificate in `<name>.pem`.
    async fn ca(&self, name: &str) -> Result<PathBuf, HarnessError> {
        self.keytool(&format!(
            "-genkeypair -alias {name} -keyalg RSA -keysize 2048 -dname CN={name} -ext bc:c \
             -validity 30 -keystore {name}.p12 -storetype PKCS12"
        ))
        .await?;
        self.keytool(&format!(
            "-exportcert -rfc -alias {name} -keystore {name}.p12 -file {name}.pem"
        ))
        .await?;
        Ok(self.dir.join(format!("{name}.pem")))
    }

    /// A key in `<who>.p12` whose certificate `<ca>` signed (also in `<who>.pem`); the
    /// keystore holds the chain, as Flink presents it.
    async fn signed_key(&self, who: &str, ca: &str) -> Result<(), HarnessError> {
        self.keytool(&format!(
            "-genkeypair -alias {who} -keyalg RSA -keysize 2048 -dname CN={who} -ext {SAN} \
             -validity 30 -keystore {who}.p12 -storetype PKCS12"
        ))
        .await?;
        self.keytool(&format!(
            "-certreq -alias {who} -keystore {who}.p12 -file {who}.csr"
        ))
        .await?;
        self.keytool(&format!(
            "-gencert -alias {ca} -keystore {ca}.p12 -rfc -infile {who}.csr -outfile {who}.pem \
             -ext {SAN} -validity 30"
        ))
        .await?;
        self.keytool(&format!(
            "-importcert -noprompt -alias {ca} -file {ca}.pem -keystore {who}.p12"
        ))
        .await?;
        self.keytool(&format!(
            "-importcert -alias {who} -file {who}.pem -keystore {who}.p12"
        ))
        .await
    }

    /// keytool with `args`, the store password taken from the environment.
    async fn keytool(&self, args: &str) -> Result<(), HarnessError> {
        self.run("keytool", &format!("{args} -storepass:env {PASSWORD_ENV}"))
            .await
    }

    /// Runs `program` in the folder; an error carries its output (never the password,
    /// which only the environment holds).
    async fn run(&self, program: &str, args: &str) -> Result<(), HarnessError> {
        let output = tokio::process::Command::new(program)
            .args(args.split_whitespace())
            .current_dir(self.dir)
            .env(PASSWORD_ENV, self.password)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| HarnessError::new(STEP, format!("cannot run {program}: {e}")))?;
        if output.status.success() {
            return Ok(());
        }
        Err(HarnessError::new(
            STEP,
            format!(
                "{program} {args} failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flink_harness::config::{render, ClusterSettings, Ports};
    use crate::flink_harness::ConfigFormat;

    #[test]
    fn the_cluster_config_turns_on_mutual_tls_and_debug_hides_the_password() {
        let tls = RestTls {
            password: "s3cret-Password".to_owned(),
            ca_pem: "/k/ca.pem".into(),
            keystore: "/k/rest.p12".into(),
            truststore: "/k/truststore.p12".into(),
            client_cert_pem: "/k/agent.pem".into(),
            client_key_pem: "/k/agent.key".into(),
        };
        let settings = ClusterSettings {
            rest_tls: Some(tls.clone()),
            ..ClusterSettings::default()
        };
        let ports = Ports { rest: 1, rpc: 2 };
        let text = render(
            &settings,
            ports,
            Path::new("/r"),
            "",
            ConfigFormat::Standard,
        )
        .expect("renders");
        let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("valid YAML");
        assert_eq!(yaml["security.ssl.rest.enabled"], "true");
        assert_eq!(yaml["security.ssl.rest.authentication-enabled"], "true");
        assert_eq!(yaml["security.ssl.rest.keystore"], "/k/rest.p12");
        assert_eq!(yaml["security.ssl.rest.truststore"], "/k/truststore.p12");
        assert_eq!(yaml["security.ssl.rest.key-password"], "s3cret-Password");
        assert!(!format!("{tls:?} {settings:?}").contains("s3cret"));
    }
}
