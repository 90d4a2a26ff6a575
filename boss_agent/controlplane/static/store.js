// What the page knows, as the event stream last said it: devices and tasks by id.
export const devices = new Map();
export const tasks = new Map();
