//! A store in an S3 bucket, through `aws-sdk-s3` with the standard credential chain
//! (environment, profile, web identity, container and instance roles).
//!
//! Each object carries its sha256 as user metadata (`x-amz-meta-sha256`): a put whose bytes
//! the object already has is skipped after one HEAD. Files above the part size go up as a
//! multipart upload, parts in parallel within a bound; every request is retried with
//! exponential backoff by the SDK's standard retry policy.

use std::path::Path;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::primitives::{ByteStream, Length};
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use berth_formats::Sha256Digest;
use futures::{StreamExt as _, TryStreamExt as _};

use super::{Put, S3Settings, StoreError};

/// The user metadata key that holds an object's sha256.
const SHA256_METADATA: &str = "sha256";

pub struct S3Store {
    client: Client,
    bucket: String,
    prefix: String,
    endpoint: String,
    part_size: u64,
    concurrency: usize,
}

impl S3Store {
    pub async fn connect(
        bucket: &str,
        prefix: &str,
        settings: &S3Settings,
    ) -> Result<Self, StoreError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let shared = loader.load().await;
        let mut config = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(settings.path_style)
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(settings.attempts.max(1))
                    .with_initial_backoff(Duration::from_millis(200)),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .read_timeout(Duration::from_secs(60))
                    .build(),
            );
        if shared.region().is_none() {
            config = config.region(Region::new("us-east-1"));
        }
        if let Some(endpoint) = &settings.endpoint {
            config = config.endpoint_url(endpoint.clone());
        }
        Ok(Self {
            client: Client::from_conf(config.build()),
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            endpoint: settings
                .endpoint
                .clone()
                .unwrap_or_else(|| "the AWS S3 endpoint".to_string()),
            part_size: settings.part_size.max(5 * 1024 * 1024),
            concurrency: settings.concurrency.max(1),
        })
    }

    fn key(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    pub fn describe(&self, key: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.key(key))
    }

    /// One clear line for a failed request: the service's code and message, or why the
    /// endpoint could not be reached.
    fn error<E>(&self, key: &str, error: SdkError<E, HttpResponse>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let message = match &error {
            SdkError::DispatchFailure(failure) => {
                // The innermost cause says it plainly (`Connection refused`).
                let mut innermost = None;
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    innermost = Some(cause.to_string());
                    source = cause.source();
                }
                let mut message = format!("cannot reach {}", self.endpoint);
                if let Some(cause) = innermost {
                    message = format!("{message}: {cause}");
                }
                if failure.is_timeout() {
                    message.push_str(" (timed out)");
                }
                message
            }
            SdkError::TimeoutError(_) => format!("{} did not answer in time", self.endpoint),
            _ => match (error.code(), error.message(), error.raw_response()) {
                (Some(code), Some(message), _) => format!("{code}: {message}"),
                (Some(code), None, _) => code.to_string(),
                // A HEAD answer has no body to say why.
                (None, _, Some(response)) => match response.status().as_u16() {
                    401 | 403 => format!(
                        "access denied (HTTP {}): check the credentials and the bucket's permissions",
                        response.status().as_u16()
                    ),
                    status => format!("the server answered HTTP {status}"),
                },
                _ => aws_sdk_s3::error::DisplayErrorContext(&error).to_string(),
            },
        };
        StoreError::S3 {
            location: self.describe(key),
            message,
        }
    }

    /// The sha256 the stored object records, or `None` when there is no object.
    async fn stored_digest(&self, key: &str) -> Result<Option<String>, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(self.key(key))
            .send()
            .await
        {
            Ok(head) => Ok(Some(
                head.metadata()
                    .and_then(|metadata| metadata.get(SHA256_METADATA))
                    .cloned()
                    .unwrap_or_default(),
            )),
            Err(SdkError::ServiceError(error)) if error.err().is_not_found() => Ok(None),
            Err(error) => Err(self.error(key, error)),
        }
    }

    pub async fn put(
        &self,
        key: &str,
        path: &Path,
        digest: Sha256Digest,
    ) -> Result<Put, StoreError> {
        if self.stored_digest(key).await?.as_deref() == Some(digest.hex().as_str()) {
            return Ok(Put::Unchanged);
        }
        let size = fs_err::tokio::metadata(path)
            .await
            .map_err(|source| StoreError::Io {
                location: path.display().to_string(),
                source,
            })?
            .len();
        if size <= self.part_size {
            let body = self.body(path, 0, size).await?;
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(self.key(key))
                .metadata(SHA256_METADATA, digest.hex())
                .content_length(size as i64)
                .body(body)
                .send()
                .await
                .map_err(|error| self.error(key, error))?;
            return Ok(Put::Written);
        }
        let upload = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(self.key(key))
            .metadata(SHA256_METADATA, digest.hex())
            .send()
            .await
            .map_err(|error| self.error(key, error))?;
        let upload_id = upload.upload_id().unwrap_or_default().to_string();
        match self.put_parts(key, path, size, &upload_id).await {
            Ok(parts) => {
                let count = parts.len();
                self.client
                    .complete_multipart_upload()
                    .bucket(&self.bucket)
                    .key(self.key(key))
                    .upload_id(&upload_id)
                    .multipart_upload(
                        CompletedMultipartUpload::builder()
                            .set_parts(Some(parts))
                            .build(),
                    )
                    .send()
                    .await
                    .map_err(|error| self.error(key, error))?;
                Ok(Put::WrittenInParts(count))
            }
            Err(error) => {
                // Leave no parts behind to be billed; a failure here changes nothing.
                let _ = self
                    .client
                    .abort_multipart_upload()
                    .bucket(&self.bucket)
                    .key(self.key(key))
                    .upload_id(&upload_id)
                    .send()
                    .await;
                Err(error)
            }
        }
    }

    async fn put_parts(
        &self,
        key: &str,
        path: &Path,
        size: u64,
        upload_id: &str,
    ) -> Result<Vec<CompletedPart>, StoreError> {
        let offsets: Vec<(i32, u64)> = (0..size)
            .step_by(self.part_size as usize)
            .enumerate()
            .map(|(index, offset)| (index as i32 + 1, offset))
            .collect();
        let mut parts: Vec<CompletedPart> = futures::stream::iter(offsets)
            .map(|(number, offset)| async move {
                let length = self.part_size.min(size - offset);
                let body = self.body(path, offset, length).await?;
                let part = self
                    .client
                    .upload_part()
                    .bucket(&self.bucket)
                    .key(self.key(key))
                    .upload_id(upload_id)
                    .part_number(number)
                    .content_length(length as i64)
                    .body(body)
                    .send()
                    .await
                    .map_err(|error| self.error(key, error))?;
                Ok::<_, StoreError>(
                    CompletedPart::builder()
                        .part_number(number)
                        .set_e_tag(part.e_tag().map(str::to_string))
                        .build(),
                )
            })
            .buffer_unordered(self.concurrency)
            .try_collect()
            .await?;
        parts.sort_by_key(|part| part.part_number());
        Ok(parts)
    }

    /// A body of `length` bytes of the file from `offset`, read as it is sent (and read again
    /// on a retry).
    async fn body(&self, path: &Path, offset: u64, length: u64) -> Result<ByteStream, StoreError> {
        ByteStream::read_from()
            .path(path)
            .offset(offset)
            .length(Length::Exact(length))
            .build()
            .await
            .map_err(|error| StoreError::Io {
                location: path.display().to_string(),
                source: std::io::Error::other(error),
            })
    }

    /// The object under `key`, or `None` when there is none.
    async fn get(&self, key: &str) -> Result<Option<GetObjectOutput>, StoreError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.key(key))
            .send()
            .await
        {
            Ok(object) => Ok(Some(object)),
            Err(SdkError::ServiceError(error)) if error.err().is_no_such_key() => Ok(None),
            Err(error) => Err(self.error(key, error)),
        }
    }

    pub async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(object) = self.get(key).await? else {
            return Ok(None);
        };
        let bytes = object
            .body
            .collect()
            .await
            .map_err(|error| StoreError::S3 {
                location: self.describe(key),
                message: error.to_string(),
            })?;
        Ok(Some(bytes.into_bytes().to_vec()))
    }

    pub async fn reader(
        &self,
        key: &str,
    ) -> Result<Box<dyn tokio::io::AsyncRead + Send + Unpin>, StoreError> {
        match self.get(key).await? {
            Some(object) => Ok(Box::new(object.body.into_async_read())),
            None => Err(StoreError::Missing {
                location: self.describe(key),
            }),
        }
    }
}
