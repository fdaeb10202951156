-- Argo CD health of a FaultTolerantSparkJob, from the status the ftspark operator writes (Lua 5.1).
local hs = {}

local function condition(kind)
  if obj.status.conditions == nil then return nil end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then return c end
  end
  return nil
end

if obj.status == nil or obj.status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the ftspark operator"
  return hs
end

local phase = obj.status.phase
local ready = condition("Ready")
local degraded = condition("Degraded")

if ready ~= nil and ready.status == "False" and ready.reason == "InvalidSpec" then
  hs.status = "Degraded"
  hs.message = ready.message
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to act on the new spec"
  return hs
end

if phase == "Running" then
  if obj.status.latestCheckpoint ~= nil then
    hs.status = "Healthy"
    hs.message = "Running, latest checkpoint " .. tostring(obj.status.latestCheckpoint.id)
  else
    hs.status = "Progressing"
    hs.message = "Running, waiting for the first checkpoint"
  end
elseif phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "The job finished"
elseif phase == "Stopped" or phase == "Suspended" or phase == "Cancelled" then
  hs.status = "Suspended"
  hs.message = phase .. "; set desiredState: running to resume"
elseif phase == "Failed" then
  hs.status = "Degraded"
  hs.message = (ready ~= nil and ready.message) or "The job failed"
elseif degraded ~= nil and degraded.status == "True" then
  -- Stuck on the way up (image pull errors, a restarting driver): say why.
  hs.status = (phase == "Restarting") and "Progressing" or "Degraded"
  hs.message = phase .. ": " .. (degraded.message or degraded.reason)
else
  hs.status = "Progressing"
  hs.message = phase
end
return hs
