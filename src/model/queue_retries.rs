//! Whether a BullMQ consumer's failed jobs are ever retried. BullMQ runs a job once unless the
//! queue (`defaultJobOptions`) or the `add` call sets `attempts`; a job whose worker crashes is
//! still run again (a stalled job), so duplicates stay possible, but a thrown error is final.

use super::handlers::{Framework, Handler};

/// A BullMQ handler whose file builds its queue and its worker and sets no `attempts` and no
/// default job options anywhere: what it throws is never retried. Without that evidence (the
/// queue built in another file, options read from elsewhere) retries are assumed.
pub fn never_retried(handler: &Handler) -> bool {
    if handler.framework != Framework::Bullmq {
        return false;
    }
    let src = &handler.file.text;
    src.contains("new Queue(")
        && src.contains("new Worker(")
        && !src.contains("defaultJobOptions")
        && !crate::regex!(r#"\battempts['"]?\s*:"#).is_match(src)
        && !src.contains("...")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::Project;
    use crate::source::{Dialect, SourceFile};
    use std::sync::Arc;

    fn handlers_of(code: &str) -> Vec<Handler> {
        let file = Arc::new(SourceFile::new("jobs/worker.ts".into(), code.to_string(), Dialect::TypeScript).unwrap());
        super::super::handlers::find_handlers(&file, &Project::new(), &crate::config::Config::default())
    }

    #[test]
    fn queue_and_worker_without_attempts_are_never_retried() {
        let code = "import { Queue, Worker } from 'bullmq';\nconst q = new Queue('mail', { connection });\n\
                    export const add = (d) => q.add('send', d, { jobId: d.id });\n\
                    new Worker('mail', async (job) => { await send(job.data); }, { connection });\n";
        let found = handlers_of(code);
        assert!(!found.is_empty());
        assert!(found.iter().all(never_retried));
    }

    #[test]
    fn attempts_anywhere_in_the_file_or_spread_options_mean_retries() {
        for options in ["{ attempts: 3 }", "{ defaultJobOptions: { backoff: 1 } }", "{ ...jobOptions }"] {
            let code = format!(
                "import {{ Queue, Worker }} from 'bullmq';\nconst q = new Queue('mail', {options});\n\
                 new Worker('mail', async (job) => {{ await send(job.data); }});\n"
            );
            assert!(handlers_of(&code).iter().all(|h| !never_retried(h)), "{options}");
        }
    }

    #[test]
    fn a_worker_without_its_queue_in_the_file_is_assumed_retried() {
        let code = "import { Worker } from 'bullmq';\nnew Worker('mail', async (job) => { await send(job.data); });\n";
        let found = handlers_of(code);
        assert!(!found.is_empty());
        assert!(found.iter().all(|h| !never_retried(h)));
    }
}
