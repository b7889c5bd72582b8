-- Answer (or cancel) an interrupt exactly once: see _resume.lua (KEYS and ARGV are its K and A).
local refused = resume_refused(KEYS, ARGV)
if refused then return refused end
return resume_commit(KEYS, ARGV)
