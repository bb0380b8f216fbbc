//! Prometheus' HTTP API: an instant query, the expression an alert's `generatorURL` carries, and
//! which series of a result are the alert's.

use reqwest::Url;
use serde::Deserialize;

use super::{Endpoint, Http, Labels, MonitoringError, Result};

pub struct PrometheusClient {
    http: Http,
}

#[derive(Deserialize)]
struct Answer {
    data: Data,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Vector(Vec<Series>),
    Matrix(Vec<Series>),
    Scalar(serde_json::Value),
    String(serde_json::Value),
}

#[derive(Deserialize)]
struct Series {
    metric: Labels,
}

/// The `error` of Prometheus' error body (`{"status":"error","errorType":…,"error":…}`).
#[derive(Deserialize)]
struct ErrorBody {
    error: String,
}

impl PrometheusClient {
    pub fn new(endpoint: Endpoint) -> Result<Self> {
        Ok(Self {
            http: Http::new("Prometheus", endpoint)?,
        })
    }

    /// The label sets of the series `expr` gives now (an instant query). An expression whose
    /// result is a scalar or a string has no series to compare: an error.
    pub async fn query(&self, expr: &str) -> Result<Vec<Labels>> {
        let answer: Answer = self
            .http
            .get("/api/v1/query", &[("query", expr)], |body| {
                serde_json::from_str::<ErrorBody>(body)
                    .ok()
                    .map(|b| b.error)
            })
            .await?;
        match answer.data {
            Data::Vector(series) | Data::Matrix(series) => {
                Ok(series.into_iter().map(|s| s.metric).collect())
            }
            Data::Scalar(value) | Data::String(value) => Err(MonitoringError::BadAnswer {
                system: "Prometheus",
                endpoint: self.http.endpoint.to_string(),
                message: format!("the expression gives a single value ({value}), not series"),
            }),
        }
    }

    /// Whether Prometheus holds any series of the metric `name` now: an expression over a
    /// metric it never scrapes evaluates to nothing anywhere, which says nothing of an alert.
    pub async fn has_series(&self, name: &str) -> Result<bool> {
        let escaped = name.replace('\\', "\\\\").replace('"', "\\\"");
        Ok(!self
            .query(&format!("count({{__name__=\"{escaped}\"}})"))
            .await?
            .is_empty())
    }

    /// How many series of `expr`, evaluated now, are the alert's own (`alert`, its labels:
    /// [`corresponds`]): 0 when the alert's condition no longer holds. Verification and the
    /// "resolved" proof both ask this.
    pub async fn holding(&self, expr: &str, alert: &Labels) -> Result<usize> {
        Ok(self
            .query(expr)
            .await?
            .iter()
            .filter(|s| corresponds(s, alert))
            .count())
    }
}

/// The PromQL expression of an alert, from the `g0.expr` parameter of the `generatorURL`
/// Prometheus puts on every alert it sends (`http://prom:9090/graph?g0.expr=…&g0.tab=1`).
pub fn expression(generator_url: &str) -> Option<String> {
    let url = Url::parse(generator_url)
        .or_else(|_| Url::parse("http://generator.invalid/").and_then(|b| b.join(generator_url)))
        .ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "g0.expr")
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Whether a series of the alert's expression is the alert's own: every label the two share
/// has the same value. (The alert adds labels of its rule; the series may have labels the rule
/// aggregated away from the alert — neither counts.)
pub fn corresponds(series: &Labels, alert: &Labels) -> bool {
    series
        .iter()
        .all(|(k, v)| alert.get(k).is_none_or(|a| a == v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_expression_comes_from_the_generator_url() {
        assert_eq!(
            expression(
                "http://prometheus/graph?g0.expr=predict_linear(kubelet_volume_stats_available_bytes%5B6h%5D%2C%204%20%2A%2024%20%2A%203600)%20%3C%200&g0.tab=1"
            )
            .as_deref(),
            Some("predict_linear(kubelet_volume_stats_available_bytes[6h], 4 * 24 * 3600) < 0")
        );
        assert_eq!(
            expression("/graph?g0.expr=up+%3D%3D+0").as_deref(),
            Some("up == 0"),
            "a relative generator URL and `+` for a space"
        );
        assert_eq!(expression("http://prometheus.test/graph"), None);
        assert_eq!(expression("http://prometheus.test/graph?g0.expr="), None);
        assert_eq!(expression(""), None);
    }

    #[test]
    fn a_series_is_the_alerts_when_the_shared_labels_agree() {
        let alert = labels(&[
            ("alertname", "TargetDown"),
            ("job", "api"),
            ("severity", "page"),
        ]);
        assert!(corresponds(
            &labels(&[("__name__", "up"), ("job", "api"), ("instance", "a:1")]),
            &alert
        ));
        assert!(!corresponds(
            &labels(&[("__name__", "up"), ("job", "web"), ("instance", "a:1")]),
            &alert
        ));
        assert!(
            corresponds(&Labels::new(), &alert),
            "an aggregate without labels is the alert's"
        );
    }
}
