import './base.css';
import './metrics.css';
import './health.css';
import './compare.css';
import './notify.css';
