#pragma once
/// ddprun::runtime in one include: who am I, process groups and collectives, the distributed
/// sampler, error reports for the launcher's summary, rank-aware logging, progress reports.
#include "ddprun/error.hpp"
#include "ddprun/error_report.hpp"
#include "ddprun/identity.hpp"
#include "ddprun/logging.hpp"
#include "ddprun/process_group.hpp"
#include "ddprun/progress.hpp"
#include "ddprun/sampler.hpp"
#include "ddprun/types.hpp"
